"""``oracle ask`` and ``oracle chat``: questions about the loaded traces, answered by the agent."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from bottleneck_oracle.cli._render import print_json, stderr, stdout
from bottleneck_oracle.config import Settings

if TYPE_CHECKING:
    from bottleneck_oracle.agent.conversation import Answer

__all__ = ["ask_command", "chat_command"]

_TRACE = typer.Option("--trace", help="The trace: a path (ingested the first time), an id or a name; "
                                      "default: the newest loaded.")
_DUMPS = typer.Option("--dumps", help="A folder of Flight Recorder dumps of a hung job, for questions about the hang.")
_PIPELINE = typer.Option("--pipeline", help="A pipeline-parallel job's op table (.parquet or .csv, or a folder holding "
                                            "one and its meta.yaml), for questions about its stragglers.")
_LLM = typer.Option("--llm", help="'offline' (the default planner, no network) or 'openai:MODEL'.")
_BASE_URL = typer.Option("--base-url", help="An OpenAI-compatible server (vLLM, Ollama, llama.cpp): its /v1 URL.")
_SESSION = typer.Option("--session", help="Keep the conversation under this name in the workspace and resume it "
                                          "next time: a follow-up ('what should I do about it?') refers to the "
                                          "earlier answers.")
CHAT_HELP = "/trace NAME|PATH  switch trace · /history  the questions so far · /reset  start over · /quit"


def _progress(kind: str, details: dict[str, Any]) -> None:
    """Tool calls as they stream, on stderr (trace strings printed as text, never as markup)."""
    if kind == "tool_call":
        args = ", ".join(f"{k}={v!r}" for k, v in details["args"].items())
        stderr().print(f"[dim]→ {escape(details['name'])}({escape(args)[:160]})[/]", highlight=False)
    elif kind == "tool_result":
        state = "ok" if details["ok"] else "error"
        stderr().print(f"[dim]  {escape(details['name'])}: {state}, {details['ms']} ms[/]", highlight=False)
    elif kind == "repair":
        stderr().print("[dim]  grounding check: answer sent back to be repaired[/]", highlight=False)


def _print_answer(a: Answer, verbose: bool = False) -> None:
    stdout().print(escape(a.render(verbose) if verbose else a.answer), highlight=False, soft_wrap=True)
    if verbose:  # everything the tools returned, as they returned it
        for r in a.extra.get("results", []):
            stdout().print(escape(f"{r['name']}({r['args']}) returned: {r['data']}"), highlight=False, soft_wrap=True)
    if not a.grounded:
        stderr().print(f"[yellow]not grounded:[/] numbers no tool returned: {escape(', '.join(a.ungrounded_numbers))}",
                       highlight=False)


def ask_command(
    question: Annotated[str, typer.Argument(help="The question, e.g. 'Why is step 3 slow?'.")],
    trace: Annotated[Optional[str], _TRACE] = None,
    dumps: Annotated[Optional[str], _DUMPS] = None,
    pipeline: Annotated[Optional[str], _PIPELINE] = None,
    llm: Annotated[str, _LLM] = "offline",
    base_url: Annotated[Optional[str], _BASE_URL] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    session: Annotated[Optional[str], _SESSION] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print all the evidence and everything the "
                                                                 "tools returned.")] = False,
) -> None:
    """Ask one question about a trace. The answer's first line is the verdict with its number, then
    the evidence (each line naming the tool it came from), Do: what to change with its predicted saving,
    and Check: the command that verifies it. Exits 2 when the question names something the trace does
    not have (the answer lists what it has)."""
    from bottleneck_oracle.agent.conversation import Conversation
    from bottleneck_oracle.agent.intents import classify

    settings = Settings.from_env()
    stage = None if as_json else (lambda what: stderr().print(f"[dim]{escape(what)}...[/]", highlight=False))
    with Conversation(settings, trace=trace, llm=llm, base_url=base_url, session=session, stage=stage,
                      dumps=dumps, pipeline=pipeline) as conversation:
        # a trace that is not there fails here, in one line (exit 2); a question about a hung job or a pipeline
        # job needs none (and no graph database): without its dumps or op table, its answer says what to pass
        if trace is not None or (dumps is None and pipeline is None
                                 and classify(question).name not in ("hang", "stragglers")):
            conversation.context.resolve()
        answer = conversation.ask(question, None if as_json else _progress)
    gc.freeze()  # the process ends after the answer: its exit need not collect the objects the imports made (~0.3 s)
    if as_json:
        print_json(answer.to_json())
    else:
        _print_answer(answer, verbose)
    if not answer.answered and any(not c["ok"] for c in answer.tool_calls):
        raise typer.Exit(2)  # bad input (a step or trace that does not exist): the answer says which


def chat_command(
    trace: Annotated[Optional[str], _TRACE] = None,
    session: Annotated[Optional[str], _SESSION] = None,
    llm: Annotated[str, _LLM] = "offline",
    base_url: Annotated[Optional[str], _BASE_URL] = None,
) -> None:
    """Talk with the agent: questions one after another, tool calls shown as they run; a follow-up
    ('and on rank 1?', 'how much would that save?') refers to the earlier answers."""
    from bottleneck_oracle.agent.conversation import Conversation
    from bottleneck_oracle.errors import OracleError

    settings = Settings.from_env()
    console = stderr()
    with Conversation(settings, trace=trace, llm=llm, base_url=base_url, session=session,
                      stage=lambda what: console.print(f"[dim]{escape(what)}...[/]")) as conversation:
        earlier = conversation.history()
        console.print(f"[bold]oracle chat[/] ({llm}{f', session {escape(session)}' if session else ''}"
                      f"{f', {len(earlier)} earlier question(s)' if earlier else ''}). {CHAT_HELP}", highlight=False)
        while True:
            try:
                line = input("? ").strip()
            except (EOFError, KeyboardInterrupt):
                break
            if not line:
                continue
            if line in ("/quit", "/exit"):
                break
            if line == "/reset":
                conversation.reset()
                console.print("conversation reset")
                continue
            if line == "/history":
                for q, a in conversation.history():
                    console.print(f"[bold]? {escape(q)}[/]\n{escape(a)}", highlight=False)
                continue
            if line.startswith("/trace"):
                conversation.set_trace(line.removeprefix("/trace").strip() or None)
                console.print(f"trace: {escape(conversation.context.trace or 'the newest loaded')}", highlight=False)
                continue
            if line.startswith("/"):
                console.print(f"unknown command {escape(line)}; {CHAT_HELP}", highlight=False)
                continue
            try:
                _print_answer(conversation.ask(line, _progress))
            except OracleError as e:  # a bad question or a down server ends the answer, not the chat
                console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
