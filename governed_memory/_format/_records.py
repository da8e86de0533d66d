"""The MEMORY.md format: header, message blocks, escaping and the parser.

Byte for byte the reference's format (reference-behaviour A2, A4)::

    # Agent Memory\\n\\n**Conversation:** {name}\\n**Created:** {iso}\\n\\n---\\n\\n## Interaction Log\\n\\n
    ### {role} — {iso}\\n\\n{content stripped}\\n\\n---\\n\\n      (one block per message)

Two additions, both invisible for ordinary content:

* Escaping (fixes D6, forged records). A content line that has the shape of a
  block header (``### … — …``, optionally after backslashes) is written with
  one more leading backslash, and the parser removes exactly one. Markdown
  renders ``\\###`` as the literal text ``###``, so the file stays readable.
  Line boundaries are ``\\n``, ``\\r\\n`` and ``\\r``, the same ones a
  text-mode reader (and so the preload) sees. See docs/format.md.
* An optional metadata line right under a block header,
  ``<!-- gm {"subject": "…"} -->``, written only in governed mode. The
  default mode never writes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HEADER_MARKER",
    "PRELOAD_PREFIX",
    "SEPARATOR",
    "MemoryFile",
    "Record",
    "escape_content",
    "has_records",
    "newest_records",
    "parse_memory",
    "record_offsets",
    "record_offsets_newest_first",
    "render_block",
    "render_header",
    "to_disk_text",
    "unescape_content",
]

EM_DASH = "\u2014"
SEPARATOR = "\n\n---\n\n"
HEADER_MARKER = "## Interaction Log\n\n"
PRELOAD_PREFIX = (
    f"[Persistent Memory {EM_DASH} MEMORY.md]\n"
    "The following is this conversation's persistent memory from prior sessions. "
    "Use it to continue context coherently.\n\n"
)
META_OPEN = "<!-- gm "
META_CLOSE = " -->"

# A line with the shape of a block header, after any number of backslashes.
_LINE_START = r"(?:(?<=\n)|(?<=\r)|\A)"
_ESCAPE_RE = re.compile(_LINE_START + r"(?=\\*### [^\r\n]* " + EM_DASH + " )")
_UNESCAPE_RE = re.compile(_LINE_START + r"\\(?=\\*### [^\r\n]* " + EM_DASH + " )")
# The role excludes \r as the escape rule does: a content line "### a\r — b" is
# not escaped, so it must not read as a header. A header torn by a crash at
# the end of the file still ends the record before it.
_BLOCK_HEADER_RE = re.compile(r"^### ([^\r\n]*) " + EM_DASH + r" ([^\n]*)(?:\n|\Z)", re.MULTILINE)
# Endings of a last record whose separator was cut short (hand edit, power cut).
_CUT_SEPARATORS = ("\n\n---\n", "\n\n---")
_CONV_RE = re.compile(r"^\*\*Conversation:\*\* ([^\n]*)$", re.MULTILINE)
_CREATED_RE = re.compile(r"^\*\*Created:\*\* ([^\n]*)$", re.MULTILINE)


# json.dumps(meta, ensure_ascii=True, sort_keys=True, separators=(",", ":")) builds
# this encoder on every call (every governed add()); it keeps no state between calls.
_META_JSON = json.JSONEncoder(ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode


def render_header(conversation_name: str, created_iso: str) -> str:
    """The header of a new MEMORY.md (A2)."""
    return (
        f"# Agent Memory\n\n**Conversation:** {conversation_name}\n"
        f"**Created:** {created_iso}\n\n---\n\n{HEADER_MARKER}"
    )


def to_disk_text(content: Any) -> str | None:
    """The text a message contributes to disk, or None when nothing is written (A5)."""
    if content is None:
        return None
    text = content if isinstance(content, str) else str(content)
    text = text.strip()
    return text or None


def escape_content(text: str) -> str:
    """Add one backslash before every header-shaped line (reversible)."""
    # Every header-shaped line contains both substrings; checking them first
    # skips the regex scan (the hot path of add()) for ordinary content. The
    # em dash goes first: ASCII text cannot hold it, and CPython answers that
    # without scanning (a 400-character "### " scan costs 0.4 us).
    if f" {EM_DASH} " not in text or "### " not in text:
        return text
    return _ESCAPE_RE.sub("\\\\", text)


def unescape_content(text: str) -> str:
    """Invert :func:`escape_content`."""
    # An escaped line holds the em dash with its spaces and a backslash right
    # before "### ": without both (ordinary content) there is nothing to undo,
    # and the regex, which tries every position, is skipped. The em dash goes
    # first, as in escape_content.
    if f" {EM_DASH} " not in text or "\\### " not in text:
        return text
    return _UNESCAPE_RE.sub("", text)


def render_block(role: str, timestamp: str, text: str, meta: dict[str, Any] | None = None) -> str:
    """One message block (A4); ``text`` is the stripped disk text."""
    meta_line = ""
    if meta:
        encoded = _META_JSON(meta)
        # ">" only occurs inside JSON strings; \u003e keeps "-->" in a value
        # from closing the HTML comment when the file is rendered.
        encoded = encoded.replace(">", "\\u003e")
        meta_line = f"{META_OPEN}{encoded}{META_CLOSE}\n"
    return f"### {role} {EM_DASH} {timestamp}\n{meta_line}\n{escape_content(text)}{SEPARATOR}"


@dataclass(frozen=True)
class Record:
    """One message block read back from a memory file.

    ``raw`` is the block exactly as stored (for bounded preloads and
    rewrites); ``meta`` is the governed-mode metadata, empty in default mode.
    """

    role: str
    timestamp: str
    content: str
    meta: dict[str, Any] = field(default_factory=dict)
    raw: str = field(default="", repr=False, compare=False)

    @property
    def subject_id(self) -> str | None:
        value = self.meta.get("subject")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class MemoryFile:
    """A parsed MEMORY.md or archive: its header fields, preamble and records."""

    conversation: str | None
    created: str | None
    preamble: str
    records: list[Record]


def has_records(text: str) -> bool:
    """Whether ``text`` holds at least one message block (:func:`parse_memory` finds a record).

    Stops at the first block header, so it costs next to nothing on a large file.
    """
    return next(_headers(text, _body_start(text)), None) is not None


def _body_start(text: str) -> int:
    """Where records may start (a line start): after the ``## Interaction Log`` line, if any."""
    marker = text.find(HEADER_MARKER)
    return marker + len(HEADER_MARKER) if marker >= 0 else 0


def _headers(text: str, start: int) -> Iterator[re.Match[str]]:
    """Block headers from ``start`` (a line start) on: what ``_BLOCK_HEADER_RE.finditer`` finds.

    Content lines of this shape are escaped on write, so every unescaped
    header-shaped line is a real block boundary. A header starts a line with
    ``"### "``: ``str.find`` jumps between those lines at memchr speed and the
    regex only checks them, instead of the regex engine trying every position
    of the text (half a second on a 50 MB memory).
    """
    match = _BLOCK_HEADER_RE.match
    pos = start
    while True:
        if text.startswith("### ", pos):
            found = match(text, pos)
            if found is not None:
                yield found
        pos = text.find("\n### ", pos) + 1
        if not pos:
            return


def record_offsets(text: str) -> Iterator[int]:
    """Where each record of ``text`` starts, oldest first (where :func:`parse_memory` splits).

    The first offset is the length of the preamble. Lazy: taking the first
    costs next to nothing.
    """
    return (match.start() for match in _headers(text, _body_start(text)))


def record_offsets_newest_first(text: str) -> Iterator[int]:
    """Where each record of ``text`` starts, newest first, scanning from the end.

    Whether a line is a block header depends on that line alone, so the
    headers found backwards are those :func:`record_offsets` finds: taking
    the newest records costs their size, not the file's.
    """
    body_start = _body_start(text)
    match = _BLOCK_HEADER_RE.match
    end = len(text)
    while True:
        # A header line after body_start is preceded by the newline ending the
        # line before ("\n" never occurs inside "### ", so finds cannot overlap).
        newline = text.rfind("\n### ", max(body_start - 1, 0), end)
        if newline < 0:
            break
        if match(text, newline + 1) is not None:
            yield newline + 1
        end = newline
    if body_start == 0 and match(text, 0) is not None:
        yield 0


def parse_memory(text: str) -> MemoryFile:
    """Parse a MEMORY.md or archive written by governed_memory or the reference.

    Files the reference wrote are read as it wrote them: a header-shaped line
    it failed to escape is, unavoidably, a record boundary. The split is
    lossless: ``preamble`` (everything before the first record) followed by
    every record's ``raw`` is ``text``.
    """
    body_start = _body_start(text)
    preamble = text[:body_start]
    conv = _CONV_RE.search(preamble)
    created = _CREATED_RE.search(preamble)
    headers = list(_headers(text, body_start))
    ends = [match.start() for match in headers[1:]] + [len(text)] if headers else []
    records: list[Record] = []
    flat: dict[str, dict[str, Any]] = {}  # metadata lines of scalars parsed so far
    # Offsets into ``text`` rather than sliced bodies: one copy per record for
    # the content and one for ``raw``, whatever the metadata and separators.
    for match, end in zip(headers, ends, strict=True):
        pos = match.end()
        meta: dict[str, Any] = {}
        if text.startswith(META_OPEN, pos, end):
            line_end = text.find("\n", pos, end)
            if line_end < 0:
                line_end = end
            if text.endswith(META_CLOSE, pos, line_end):
                line = text[pos + len(META_OPEN) : line_end - len(META_CLOSE)]
                # A memory holds few distinct metadata lines (one per subject):
                # each is parsed once per file, each record gets its own copy.
                loaded = flat.get(line)
                if loaded is None:
                    loaded = _load_meta(line)
                    if loaded is not None and all(type(v) in _SCALARS for v in loaded.values()):
                        flat[line] = dict(loaded)
                else:
                    loaded = dict(loaded)
                if loaded is not None:
                    meta = loaded
                    pos = min(line_end + 1, end)
        if text.startswith("\n", pos, end):
            pos += 1
        if text.endswith(SEPARATOR, pos, end):
            body = text[pos : end - len(SEPARATOR)]
        else:
            # Only a last or torn record can lack its separator. Content is
            # stripped before it is written, so trailing whitespace never is.
            for cut in _CUT_SEPARATORS:
                if text.endswith(cut, pos, end):
                    body = text[pos : end - len(cut)]
                    break
            else:
                body = text[pos:end].rstrip()
        records.append(
            Record(
                role=match.group(1),
                timestamp=match.group(2),
                content=unescape_content(body),
                meta=meta,
                raw=text[match.start() : end],
            )
        )
    return MemoryFile(
        conversation=conv.group(1) if conv else None,
        created=created.group(1) if created else None,
        preamble=text[: headers[0].start()] if headers else text,
        records=records,
    )


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _load_meta(line: str) -> dict[str, Any] | None:
    """The metadata object of a ``<!-- gm ... -->`` line; None when it is not one."""
    try:
        loaded = json.loads(line)
    except (ValueError, RecursionError):
        # Not metadata this library wrote (it writes one flat object): a
        # hand-edited or hostile line, deeply nested JSON included, stays
        # content, as any other line that is not valid metadata.
        return None
    return loaded if isinstance(loaded, dict) else None


def newest_records(preamble: str, records: list[Record], max_chars: int | None) -> list[Record]:
    """The newest of ``records`` that fit ``max_chars`` together with ``preamble``.

    All of them when they fit (or there is no bound); none when not even the
    newest does: ``Conversation``'s bounded preload for records parsed already.
    """
    if max_chars is None:
        return records
    budget = max_chars - len(preamble)
    if sum(len(record.raw) for record in records) <= budget:
        return records
    first = len(records)
    while first and len(records[first - 1].raw) <= budget:
        first -= 1
        budget -= len(records[first].raw)
    return records[first:]
