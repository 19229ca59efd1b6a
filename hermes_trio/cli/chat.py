"""``hermes-trio chat``: the agent in a terminal.

One turn at a time: read a line (prompt_toolkit, in a worker thread because
its prompt is synchronous), run the turn (:mod:`hermes_trio.turn`) with the
terminal consumer, and turn Ctrl-C into a cancellation of that turn.
Cancelling it closes the upstream stream and stops tool processes; the
consumer leaves the partial answer on screen marked as interrupted.

Streaming: a person at a terminal expects to see the answer arrive, so the
terminal streams unless ``streaming.cli: false`` or ``--no-stream`` says
otherwise (the global ``streaming.enabled`` switch, off by default, is meant
for the chat platforms and does not turn terminal streaming off).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import termios
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import trio
from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.styles import Style
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..agent import Agent
from ..approvals import ApprovalChannel, Refused, answer_approval
from ..config import Config
from ..consumers.context_lines import compact_reply, context_line
from ..consumers.terminal import TerminalSettings, TerminalView
from ..endings import CancelCause
from ..events import ApprovalRequested, StreamEvent, TurnFinished
from ..llm import NO_MODEL_SERVER, ModelError
from ..redaction import shown_url
from ..tools import ApprovalDecision, ToolContext
from ..turn import INTERNAL_ERROR, Turn, run_turn
from ..wire.messages import Message
from .demo import agent_for
from .process import EXIT_INTERRUPTED, Shell

__all__ = ["SLASH_COMMANDS", "chat_streams", "parse_approval", "run_chat"]

log = logging.getLogger("hermes_trio.chat")

# ApprovalResolved.by for an answer typed at the terminal.
TERMINAL = "terminal"
# Ctrl-C interrupts a turn; the others end the program, but after the turn
# has been stopped the clean way.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

SLASH_COMMANDS: dict[str, str] = {
    "/new": "start a fresh conversation",
    "/compact": "summarise the conversation so far, to free the model's context",
    "/context": "how much of the model's context the conversation uses",
    "/model": "show the model, or switch to another: /model NAME",
    "/yolo": "toggle running dangerous commands without asking",
    "/help": "show this help",
    "/exit": "leave (also Ctrl-D, or Ctrl-C at an empty prompt)",
}
_ALIASES = {"/quit": "/exit", "/q": "/exit", "/reset": "/new", "/clear": "/new", "/?": "/help"}

shell = Shell("chat")


def chat_streams(config: Config, no_stream: bool = False) -> bool:
    """Whether the terminal streams answers (see the module docstring)."""
    if no_stream:
        return False
    if config.streaming.cli is None:
        return True
    return config.streaming.enabled_for("cli")


def parse_approval(answer: str) -> ApprovalDecision | None:
    """The decision a typed answer means; None when it means nothing."""
    word = answer.strip().lower()
    if word in {"o", "once", "y", "yes"}:
        return ApprovalDecision.ONCE
    if word in {"a", "always"}:
        return ApprovalDecision.ALWAYS
    if word in {"d", "deny", "n", "no"}:
        return ApprovalDecision.DENY
    return None


def run_chat(config: Config, args: argparse.Namespace) -> int:
    """Entry point of ``hermes-trio chat`` (see ``hermes_trio.cli.main``)."""
    problem = None if config.model.base_url else NO_MODEL_SERVER
    return shell.run(_main, config, args, problem=problem)


async def _main(config: Config, args: argparse.Namespace) -> int:
    stdin_tty = sys.stdin.isatty()
    stdout_tty = sys.stdout.isatty()
    console = _make_console(plain=not stdout_tty)
    settings = TerminalSettings(
        show_reasoning=config.display.show_reasoning,
        show_tools=config.display.show_tools,
        show_compaction=config.display.show_compaction,
        plain=not stdout_tty,
    )
    view = TerminalView(console, settings)
    _route_logs(console, verbose=getattr(args, "verbose", False), plain=settings.plain)
    async with agent_for(config) as agent:
        chat = Chat(
            agent,
            view,
            stream=chat_streams(config, getattr(args, "no_stream", False)),
            input_fd=sys.stdin.fileno() if stdin_tty else None,
        )
        if getattr(args, "query", None):
            return await chat.ask_once(args.query)
        if stdin_tty and stdout_tty:
            return await chat.repl(_PromptReader(chat, _history_path(config)))
        return await chat.repl(_LineReader(sys.stdin, prompt_to=sys.stderr if stdin_tty else None))


def _make_console(*, plain: bool) -> Console:
    if plain:
        # No colour, no cursor movement, no wrapping to a guessed width.
        return Console(
            file=sys.stdout, force_terminal=False, no_color=True, highlight=False, soft_wrap=True
        )
    return Console(highlight=False)


class _ConsoleLogHandler(logging.Handler):
    """Log lines printed through the console, so they land above the live area."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
            self.console.print(Text(line, style="dim"), soft_wrap=True)
        except Exception:
            self.handleError(record)


def _route_logs(console: Console, *, verbose: bool, plain: bool) -> None:
    """Keep log lines from tearing through the answer.

    Problems a turn runs into (retries, a failed request) are shown by the
    terminal consumer already, so without ``-v`` only errors are logged. On a
    terminal, log lines go through the console, which knows where its live
    area is; on a pipe they stay on stderr.
    """
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.ERROR)
    if not plain:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        root.addHandler(_ConsoleLogHandler(console))


def _history_path(config: Config) -> Path | None:
    path = Path(config.store.data_dir).expanduser() / "history"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("no input history: cannot create %s (%s)", path.parent, exc)
        return None
    return path


# ---------------------------------------------------------------------------
# Terminal modes


@contextmanager
def _echo(fd: int | None, on: bool) -> Iterator[None]:
    """Turn the terminal's echo on or off for the block.

    Off during a turn: keys typed while the answer streams would otherwise be
    echoed into the middle of it. They stay in the input buffer and show up
    at the next prompt instead. Ctrl-C still raises SIGINT (ISIG stays on).
    """
    if fd is None:
        yield
        return
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    attrs = list(saved)
    attrs[3] = attrs[3] | termios.ECHO if on else attrs[3] & ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


@contextmanager
def _end_line_on_cancel(out: Console) -> Iterator[None]:
    """A Ctrl-C at a question leaves the cursor after it; later output needs its own line."""
    try:
        yield
    except trio.Cancelled:
        out.print()
        raise


async def _read_tty_line(fd: int) -> str | None:
    """One line typed at the terminal (canonical mode); None at end of input.

    Waiting on the fd instead of a blocking read in a thread keeps this
    cancellable: a timeout or Ctrl-C leaves no thread behind that would
    swallow the next line.
    """
    await trio.lowlevel.wait_readable(fd)
    data = os.read(fd, 4096)
    return data.decode(errors="replace") if data else None


# ---------------------------------------------------------------------------
# The session


class Chat:
    """One conversation at the terminal: history, model choice, approvals.

    Approvals: a turn asks through its events (``ApprovalRequested``, shown
    by the terminal view), :meth:`ask_approval` reads the answer typed here
    and gives it by id; with no terminal to type at (stdin is a pipe), the
    turn has no approval channel and such commands are refused. They wait
    ``approvals.per_platform.cli`` (else ``approvals.timeout``) seconds.
    """

    def __init__(
        self,
        agent: Agent,
        view: TerminalView,
        *,
        stream: bool,
        input_fd: int | None,
    ) -> None:
        self.agent = agent
        self.config = agent.config
        self.view = view
        self.console = view.console
        self.stream = stream
        self.input_fd = input_fd
        self.model: str | None = None
        self.messages: list[Message] = []
        self.exit_code: int | None = None  # set when a signal asked to quit
        self.ctx = self._new_context(yolo=self.config.agent.yolo)
        # Approval questions go where the user looks: the terminal, even
        # when the answer itself is piped somewhere.
        self._ask_console = (
            self.console
            if not view.settings.plain
            else Console(file=sys.stderr, highlight=False, no_color=not sys.stderr.isatty())
        )

    @property
    def model_name(self) -> str:
        return self.model or self.config.model.name or "(the server's first model)"

    def _new_context(self, *, yolo: bool) -> ToolContext:
        ctx = self.agent.new_tool_context(surface="cli")
        if self.input_fd is not None:
            # Anyone at this terminal may answer: it is the user's own.
            ctx.approvals = ApprovalChannel()
        ctx.yolo = yolo
        return ctx

    # -- turns -------------------------------------------------------------

    async def ask_once(self, question: str) -> int:
        result = await self.turn(question)
        if self.exit_code is not None:
            return self.exit_code
        if result is None:
            return EXIT_INTERRUPTED
        return 1 if result.finish_reason == "error" else 0

    async def turn(self, text: str) -> TurnFinished | None:
        """Run one turn and show it; None when it was interrupted."""
        self.messages.append({"role": "user", "content": text})
        turn = Turn()
        shown: list[TurnFinished | None] = []

        ask = self.ask_approval if self.input_fd is not None else None

        async def show(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            shown.append(await self.view.render_turn(receive, ask=ask))

        # The receiver exists before the turn starts, so an early Ctrl-C is
        # an interrupt too rather than a KeyboardInterrupt that ends the program.
        with trio.open_signal_receiver(*_STOP_SIGNALS) as signals, _echo(self.input_fd, False):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_signals, signals, turn)
                result = await run_turn(
                    self.agent,
                    self.messages,
                    show,
                    turn=turn,
                    stream=self.stream,
                    model=self.model,
                    tool_context=self.ctx,
                )
                nursery.cancel_scope.cancel()
        if shown:
            return shown[0]
        if result.error_code == INTERNAL_ERROR:
            # The renderer crashed, so the screen has not said how it ended.
            self._say(f"error: {escape(result.error or 'internal error')}", "red")
            return TurnFinished(
                "", result.usage, "error", error=result.error, error_code=result.error_code
            )
        return None

    async def _watch_signals(self, signals: Any, turn: Turn) -> None:
        interrupts = 0
        async for signum in signals:
            if signum != signal.SIGINT:
                # Asked to quit (terminal closed, kill): stop the turn the
                # clean way, which restores the terminal and stops tool
                # processes, and leave after it.
                self.exit_code = 128 + signum
                turn.cancel(f"signal {signum}", CancelCause.SHUTDOWN)
                continue
            interrupts += 1
            if interrupts > 1:
                # The first Ctrl-C asked for a clean stop; a second one means
                # the user will not wait for it.
                raise KeyboardInterrupt
            turn.cancel("interrupted")

    # -- approvals ---------------------------------------------------------

    async def ask_approval(self, request: ApprovalRequested) -> None:
        """Read the answer to an approval the view has shown, and give it.

        Gives up at the request's deadline: the turn then ends the question
        as expired, and the view says so.
        """
        assert self.input_fd is not None
        with _echo(self.input_fd, True):
            decision = await self._read_decision(request, self.input_fd)
        if decision is None:
            return
        result = answer_approval(
            request.id,
            decision is not ApprovalDecision.DENY,
            by=TERMINAL,
            always=decision is ApprovalDecision.ALWAYS,
        )
        if isinstance(result, Refused):
            self._ask_console.print(f"  [yellow]{escape(result.message)}[/]")

    async def _read_decision(self, request: ApprovalRequested, fd: int) -> ApprovalDecision | None:
        out = self._ask_console
        # Keys typed while the answer streamed must not answer this question.
        termios.tcflush(fd, termios.TCIFLUSH)
        decision: ApprovalDecision | None = None
        with trio.move_on_at(request.deadline), _end_line_on_cancel(out):
            while decision is None:
                left = max(0.0, request.deadline - trio.current_time())
                out.print(
                    Text.assemble(
                        "  Allow? ",
                        ("[o]", "bold"),
                        "nce / ",
                        ("[a]", "bold"),
                        "lways (this session) / ",
                        ("[d]", "bold"),
                        "eny ",
                        (f"(denies in {left:.0f}s) ", "dim"),
                    ),
                    end="",
                )
                out.file.flush()
                line = await _read_tty_line(fd)
                if line is None:
                    return ApprovalDecision.DENY
                decision = parse_approval(line)
                if decision is None:
                    out.print("  [yellow]please answer o, a or d[/]")
        if decision is None:
            termios.tcflush(fd, termios.TCIFLUSH)
        return decision

    # -- the loop ----------------------------------------------------------

    async def repl(self, reader: _Reader) -> int:
        if reader.interactive:
            self._banner()
        while True:
            try:
                line = await reader.read()
            except (EOFError, KeyboardInterrupt):
                if reader.interactive:
                    self.console.print("[dim]bye[/]")
                return 0
            text = line.strip()
            if not text:
                continue
            if text.lower() in ("/compact", "/context"):
                await self.context_command(text.lower())
                continue
            if text.startswith("/") and text.split()[0].lower() in (*SLASH_COMMANDS, *_ALIASES):
                if not self.command(text):
                    return 0
                continue
            if text.startswith("/") and " " not in text:
                self._say(f"unknown command {escape(text)} — /help lists the commands", "yellow")
                continue
            await self.turn(text)
            if self.exit_code is not None:
                return self.exit_code
            if reader.interactive:
                self.console.print()

    async def context_command(self, name: str) -> None:
        """``/context``: how full the window is; ``/compact``: summarise
        now (Ctrl-C stops it and leaves the conversation as it was)."""
        if name == "/context":
            tokens, window = await self.agent.context_size(self.messages, model=self.model)
            self._say(escape(context_line(tokens, window, len(self.messages))), "dim")
            return
        self._say("summarising the conversation…", "dim")
        text, color = "stopped: the conversation is as it was", "yellow"
        with trio.open_signal_receiver(signal.SIGINT) as signals, _echo(self.input_fd, False):
            async with trio.open_nursery() as nursery:

                async def stop_on_ctrl_c() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()

                nursery.start_soon(stop_on_ctrl_c)
                try:
                    event = await self.agent.compact(self.messages, model=self.model)
                    text, color = compact_reply(event), "dim"
                except ModelError as exc:
                    text, color = f"could not summarise: {exc.message}", "red"
                nursery.cancel_scope.cancel()
        self._say(escape(text), color)

    def command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, arg = text.partition(" ")
        name = _ALIASES.get(name.lower(), name.lower())
        arg = arg.strip()
        if name == "/exit":
            return False
        if name == "/help":
            width = max(map(len, SLASH_COMMANDS))
            for cmd, what in SLASH_COMMANDS.items():
                self.console.print(f"  [bold cyan]{cmd:<{width}}[/]  {what}")
            self.console.print(
                "  [dim]Ctrl-C stops the agent mid-answer; Alt-Enter or Esc Enter adds a line.[/]"
            )
        elif name == "/new":
            self.messages = []
            self.ctx = self._new_context(yolo=self.ctx.yolo)
            self._say("fresh conversation", "green")
        elif name == "/model":
            if arg:
                self.model = arg
                self._say(f"model: {escape(arg)} (for this session)", "green")
            else:
                self.console.print(
                    f"  model [bold]{escape(self.model_name)}[/] at "
                    f"{escape(shown_url(self.config.model.base_url or '?'))}"
                    f" [dim]· /model NAME switches[/]"
                )
        elif name == "/yolo":
            self.ctx.yolo = not self.ctx.yolo
            if self.ctx.yolo:
                self._say("yolo on: dangerous commands run without asking", "yellow")
            else:
                self._say("yolo off: dangerous commands ask first", "green")
        return True

    def _say(self, text: str, color: str) -> None:
        self.console.print(f"  [{color}]{text}[/]")

    def _banner(self) -> None:
        mode = "streaming" if self.stream else "not streaming"
        yolo = " · [yellow]yolo[/]" if self.ctx.yolo else ""
        self.console.print(
            f"[bold cyan]⚕ Hermes[/] · [bold]{escape(self.model_name)}[/] at "
            f"{escape(shown_url(self.config.model.base_url or '?'))} · {mode}{yolo}"
        )
        self.console.print(
            "[dim]  /help for commands · Ctrl-C interrupts the agent · Ctrl-D exits[/]"
        )


# ---------------------------------------------------------------------------
# Reading input


class _Reader:
    interactive: bool = False

    async def read(self) -> str:
        """The next line; EOFError at the end, KeyboardInterrupt to leave."""
        raise NotImplementedError


class _LineReader(_Reader):
    """Lines from a pipe or a file (``echo question | hermes-trio chat``)."""

    def __init__(self, stream: TextIO, prompt_to: TextIO | None) -> None:
        self.stream = stream
        self.prompt_to = prompt_to

    async def read(self) -> str:
        if self.prompt_to is not None:
            self.prompt_to.write("> ")
            self.prompt_to.flush()
        line = await trio.to_thread.run_sync(self.stream.readline, abandon_on_cancel=True)
        if not line:
            raise EOFError
        return line


class _PromptReader(_Reader):
    """prompt_toolkit's line editor, with history and slash-command completion.

    Its prompt is synchronous (it runs its own event loop), so it runs in a
    worker thread; nothing else draws while it waits, because turns only run
    between prompts.
    """

    interactive = True

    def __init__(self, chat: Chat, history: Path | None) -> None:
        self.chat = chat
        bindings = KeyBindings()

        @bindings.add("c-c")
        def _(event: KeyPressEvent) -> None:
            # Like a shell: Ctrl-C clears a typed line, and leaves at an empty one.
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt)

        @bindings.add("escape", "enter")
        def _(event: KeyPressEvent) -> None:
            event.app.current_buffer.insert_text("\n")

        store: History = FileHistory(str(history)) if history is not None else InMemoryHistory()
        self.session: PromptSession[str] = PromptSession(
            history=store,
            auto_suggest=AutoSuggestFromHistory(),
            completer=_SlashCompleter(),
            complete_while_typing=True,
            key_bindings=bindings,
            style=Style.from_dict({"prompt": "ansicyan bold"}),
            # Its SIGWINCH handler only works on the main thread; redrawing now
            # and then picks up a resized terminal anyway.
            refresh_interval=0.5,
        )

    async def read(self) -> str:
        line: str = await trio.to_thread.run_sync(
            lambda: self.session.prompt([("class:prompt", "❯ ")])
        )
        return line


class _SlashCompleter(Completer):
    """Completes slash command names at the start of the line."""

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        for cmd, what in SLASH_COMMANDS.items():
            if cmd.startswith(text.lower()):
                yield Completion(cmd, start_position=-len(text), display_meta=what)
