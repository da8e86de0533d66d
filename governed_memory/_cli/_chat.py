"""``governed-memory chat``: talk to an agent at the terminal; its memory persists between runs."""

from __future__ import annotations

import sys

import click

from .._errors import ModelCallError
from .._memory import Agent
from ._context import CliContext

__all__ = ["commands"]

EXIT_WORDS = ("/exit", "/quit")


@click.command("chat")
@click.argument("agent")
@click.option(
    "--model",
    "-m",
    required=True,
    help="litellm model name, e.g. gpt-4o-mini, ollama/llama3, openai/<name> with --api-base.",
)
@click.option("--system-prompt", default=None, help="System prompt (kept out of MEMORY.md).")
@click.option(
    "--api-base",
    default=None,
    help="Model endpoint (default: litellm's configuration, e.g. $OPENAI_API_BASE). "
    "Keys come from the provider's variable, e.g. $OPENAI_API_KEY.",
)
@click.option(
    "--context-length",
    type=click.IntRange(min=1),
    default=None,
    help="The model's input window in tokens (default: litellm's model table, else 16000).",
)
@click.option(
    "--summarizer",
    default=None,
    help="Model that summarizes the history when it nears the window (default: --model; "
    "'local/extractive' never leaves this machine).",
)
@click.option("--no-compression", is_flag=True, help="Never compress (MEMORY.md still persists).")
@click.option(
    "--temperature", type=click.FloatRange(min=0), default=None, help="Sampling temperature."
)
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=None, help="Longest reply, in tokens."
)
@click.option("--subject", default=None, help="Data subject of this chat (for consent policies).")
@click.pass_obj
def chat(
    cli: CliContext,
    agent: str,
    model: str,
    system_prompt: str | None,
    api_base: str | None,
    context_length: int | None,
    summarizer: str | None,
    no_compression: bool,
    temperature: float | None,
    max_tokens: int | None,
    subject: str | None,
) -> None:
    """Chat with AGENT at the terminal; its memory is kept between runs.

    Each line you type is one task; the reply is printed under the agent's
    name. Type /exit (or press Ctrl-D) to leave. A failed model call is
    reported and the chat goes on; the exit status is then 1.
    """
    bot = Agent(
        agent,
        model_name=model,
        system_prompt=system_prompt,
        api_base=api_base,
        context_length=context_length,
        context_compression=not no_compression,
        summarizer_model=summarizer,
        temperature=temperature,
        max_tokens=max_tokens,
        subject_id=subject,
        workspace_dir=cli.workspace,
        governance=cli.governance(),
    )
    resumed = bot.short_memory.preloaded
    click.echo(
        f"Chatting with {agent} ({model}); memory: {bot.memory_md_path}"
        + (" (resumed from earlier sessions)" if resumed else "")
    )
    click.echo("Type /exit or press Ctrl-D to leave.")
    failed = False
    while True:
        try:
            line = input("you> ")
        except EOFError:
            click.echo()
            break
        except KeyboardInterrupt:
            click.echo()
            break
        text = line.strip()
        if not text:
            continue
        if text.lower() in EXIT_WORDS:
            break
        try:
            reply = bot.run(text)
        except ModelCallError as exc:
            failed = True
            click.echo(f"error: {exc}", err=True)
            continue
        click.echo(f"{agent}> {reply}")
    if failed:
        sys.exit(1)


commands: list[click.Command] = [chat]
