"""How a text is cut into the pieces its frames seal: ``split_segments`` and its fast answer."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_memory._crypto import lone_subject, split_segments
from governed_memory._format._records import render_block

_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "### x",
                "### User \u2014 t",
                "\\### User \u2014 t",
                "## Interaction Log",
                '<!-- gm {"subject": "bob"} -->',
                "<!-- gm [1] -->",
                "<!-- gm -->",
                "",
                "---",
                "\r",
            ]
        ),
        st.text(alphabet='#<!-gm {}"a\u2014 \r\\', max_size=12),
    ),
    max_size=4,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    subject=st.one_of(st.none(), st.text(max_size=8)),
    role=st.text(alphabet="Ua\r#- \u2014", min_size=1, max_size=6),
    content=_lines,
    before=_lines,
    meta_line=st.one_of(st.none(), _lines),
)
def test_a_lone_block_is_recognised_only_as_split_segments_reads_it(
    subject: str | None,
    role: str,
    content: list[str],
    before: list[str],
    meta_line: list[str] | None,
) -> None:
    """Whatever the text, the fast answer is split_segments' one piece, or no answer."""
    block = render_block(
        role,
        "2026-11-30T10:00:01",
        "\n".join(content) or "x",
        ({"subject": subject} if subject is not None else None),
    )
    if meta_line is not None:  # a forged or broken metadata line, under the header
        head, _, body = block.partition("\n")
        block = f"{head}\n{chr(10).join(meta_line)}\n{body}"
    text = "\n".join(before) + block if before else block
    lone, found = lone_subject(text.encode(), {})
    if lone:
        assert split_segments(text) == [(text, found)]
    plain = "\n### " not in text and "## Interaction Log\n\n" not in text and "\r" not in role
    if meta_line is None and not before and plain:
        assert (lone, found) == (True, subject)  # what Conversation.add writes is recognised


def test_a_metadata_line_read_once_is_remembered_and_the_memory_stays_bounded() -> None:
    known: dict[bytes, str | None] = {}
    block = render_block("User", "2026-11-30T10:00:01", "hi", {"subject": "ann"}).encode()
    assert lone_subject(block, known) == (True, "ann")
    assert list(known.values()) == ["ann"]
    poisoned = dict.fromkeys(known, "bob")  # a remembered line is answered from memory
    assert lone_subject(block, poisoned) == (True, "bob")
    for n in range(200):
        meta = {"subject": f"s{n}"}
        lone_subject(render_block("User", "t", "x", meta).encode(), known)
    assert 0 < len(known) <= 64
