"""`harness run "PROMPT"` — drive a model with the project's tools (docs/spec.md §13).

The answer is streamed to stdout as it arrives; when a ``completion.post``, ``agent.stop``
or ``turn.end`` hook exists, it is printed only once those hooks allowed it, as they
left it (docs/agent-loop.md). One line per tool call goes to stderr.
Exit 0 when the model answered, 1 on a provider error or when the round limit was hit,
2 on usage, load or model-settings errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import root_option

if TYPE_CHECKING:
    from harness.results import ToolCall, ToolResult

_PREVIEW = 160


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "…"


class _Console:
    """Writes streamed text to stdout and tool lines to stderr, keeping lines apart."""

    def __init__(self) -> None:
        self.at_line_start = True

    def text(self, piece: str) -> None:
        click.echo(piece, nl=False)
        sys.stdout.flush()
        self.at_line_start = piece.endswith("\n")

    def end_line(self) -> None:
        if not self.at_line_start:
            click.echo("")
            self.at_line_start = True

    def tool(self, call: ToolCall, result: ToolResult) -> None:
        self.end_line()
        args = json.dumps(dict(call.arguments), ensure_ascii=False, default=str)
        status = "error" if result.is_error else "ok"
        click.echo(
            f"[tool] {call.name} {_preview(args)} -> {status}: {_preview(result.text)}", err=True
        )


@click.command()
@click.argument("prompt")
@root_option
@click.option(
    "--model",
    default=None,
    metavar="NAME_OR_URL",
    help="Model name (overrides model.name); a URL sets the base URL instead.",
)
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic", "copilot"]),
    default=None,
    help="Wire format: OpenAI-compatible Chat Completions or Anthropic Messages.",
)
@click.option(
    "--base-url",
    default=None,
    metavar="URL",
    help="API base URL, e.g. http://localhost:11434/v1 (overrides model.base_url).",
)
@click.option(
    "--api-key-env",
    default=None,
    metavar="VAR",
    help="Environment variable holding the API key (overrides model.api_key_env).",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Tool rounds allowed (overrides limits.max_tool_calls_per_turn).",
)
def command(
    prompt: str,
    root: Path | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    api_key_env: str | None,
    max_rounds: int | None,
) -> None:
    """Answer PROMPT with a model that may call this project's tools ("-" reads stdin)."""
    from harness.agent import run_agent
    from harness.core import load

    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise click.UsageError("PROMPT is empty")
    console = _Console()
    with load(root) as h:
        try:
            result = run_agent(
                h,
                prompt,
                model=model,
                provider=provider,
                base_url=base_url,
                api_key_env=api_key_env,
                max_rounds=max_rounds,
                on_text=console.text,
                on_tool=console.tool,
            )
        finally:
            console.end_line()
    if result.stop_reason in ("length", "max_tokens"):
        click.echo(
            f"warning: the answer was cut at the token limit "
            f"(model.max_tokens = {h.config.model.max_tokens})",
            err=True,
        )
