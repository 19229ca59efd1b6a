"""Serve a default scripted reply forever, for benchmarks and first tries.

    python -m hermes_trio.testing --port 0 --tokens 200 --delay 0.002

prints ``listening on http://127.0.0.1:PORT/v1`` once the port is bound.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import trio

from .script import TextReply
from .scripted_model.server import ScriptedModelServer

_WORDS = (
    "The scripted model streams these words so that clients have something "
    "plausible to render while nobody pays for a real model"
).split()


def default_reply(tokens: int, delay: float, first_token_delay: float = 0.0) -> TextReply:
    """A reply of exactly ``tokens`` word tokens (one leading space each after the first)."""
    words = itertools.islice(itertools.cycle(_WORDS), tokens)
    toks = [w if i == 0 else f" {w}" for i, w in enumerate(words)]
    return TextReply(tokens=toks, delay=delay, first_token_delay=first_token_delay)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hermes_trio.testing",
        description="Scripted OpenAI-compatible model server answering every request alike.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--tokens", type=int, default=200, help="tokens per reply (default 200)")
    parser.add_argument(
        "--delay", type=float, default=0.0, help="seconds between tokens (default 0)"
    )
    parser.add_argument(
        "--first-token-delay", type=float, default=0.0, help="seconds before the first token"
    )
    parser.add_argument("--model", default="scripted-model")
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="the model's window in tokens: its card says it, longer prompts get a 400",
    )
    args = parser.parse_args(argv)
    if args.tokens < 0 or args.delay < 0 or args.first_token_delay < 0:
        parser.error("--tokens, --delay and --first-token-delay must not be negative")
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be a positive number of tokens")
    return args


async def _main(args: argparse.Namespace) -> None:
    server = ScriptedModelServer(
        default=default_reply(args.tokens, args.delay, args.first_token_delay),
        model=args.model,
        host=args.host,
        port=args.port,
        context_window=args.context_window,
        # Runs forever: keeping every request would grow without bound.
        record=False,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print(f"listening on {server.base_url}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        trio.run(_main, args)
    except* KeyboardInterrupt:
        # Ctrl-C is the normal way to stop it; it may arrive wrapped in a
        # group from the serving nursery.
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
