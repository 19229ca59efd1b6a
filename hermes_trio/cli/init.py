"""``hermes-trio init``: a commented ``config.yaml`` from a few questions.

Each answer is checked as it is given — the model server answers and lists
the model, a Telegram token is accepted by Telegram — and asked again when
it is wrong. Secrets are read without echo and never printed. An existing
file is overwritten only when the user says so (``--force`` without
questions). ``--non-interactive`` takes the answers from flags, checks them
the same way (``--no-check`` skips the network) and fails with one line.
The file is written with mode 0600: it holds keys.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from ..config import Config
from ..llm import ModelError, list_models
from .discovery import discover, local_servers

__all__ = ["Answers", "check_model_server", "check_telegram", "render", "run_init"]

TIMEOUT = 10.0


class Refused(Exception):
    """An answer that does not work: the one line that says why."""


@dataclass
class Answers:
    base_url: str | None = None
    model_api_key: str | None = None
    model: str | None = None
    api_key: str | None = None
    telegram_token: str | None = None
    telegram_users: list[int] = field(default_factory=list)


def check_model_server(base_url: str, api_key: str | None) -> list[str]:
    """The models the server lists; :class:`Refused` when it does not answer."""
    if not base_url.startswith(("http://", "https://")):
        raise Refused(
            f"{base_url!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:11434/v1)"
        )
    try:
        listed = list_models(base_url, api_key, timeout=TIMEOUT)
    except ModelError as exc:
        if exc.status is None:
            raise Refused(f"cannot reach {base_url} ({exc.cause or exc.message})") from None
        if exc.status in (401, 403):
            raise Refused(f"{base_url} refused the API key (HTTP {exc.status})") from None
        raise Refused(
            f"{base_url}/models answered HTTP {exc.status}, not a model list "
            "(is it an OpenAI-compatible URL ending in /v1?)"
        ) from None
    return [name for card in listed if isinstance(name := card.get("id"), str)]


def check_telegram(token: str, api_base_url: str = "https://api.telegram.org") -> str:
    """The bot's username; :class:`Refused` when Telegram refuses the token."""
    try:
        with httpx.Client(timeout=TIMEOUT, trust_env=False) as http:
            reply = http.get(f"{api_base_url.rstrip('/')}/bot{token}/getMe")
    except httpx.HTTPError as exc:
        raise Refused(f"cannot reach Telegram ({type(exc).__name__})") from None
    try:
        body = reply.json()
    except ValueError:
        body = {}
    if not body.get("ok"):
        raise Refused("Telegram did not accept this token (check it with @BotFather)")
    return str(body["result"].get("username") or body["result"].get("id"))


def render(answers: Answers) -> str:
    """The config file, commented; every answer round-trips through
    ``load_config``."""
    model: dict[str, object] = {"base_url": answers.base_url}
    if answers.model_api_key:
        model["api_key"] = answers.model_api_key
    if answers.model:
        model["name"] = answers.model
    parts = [
        "# hermes-trio configuration, written by `hermes-trio init`.",
        "# Every key: config.yaml.example in the project. Check it: `hermes-trio doctor`.",
        "",
        "# The OpenAI-compatible model server the agent talks to.",
        yaml.safe_dump({"model": model}, sort_keys=False).rstrip(),
        "",
        "# The API server (`hermes-trio serve`): clients send",
        "# `Authorization: Bearer <key>` when a key is set.",
        yaml.safe_dump({"api_server": {"key": answers.api_key}}, sort_keys=False).rstrip(),
    ]
    if answers.telegram_token:
        parts += [
            "",
            "# Chat platforms (`hermes-trio gateway`); only allowed users get answers.",
            yaml.safe_dump(
                {
                    "platforms": {
                        "telegram": {
                            "token": answers.telegram_token,
                            "allowed_users": answers.telegram_users,
                        }
                    }
                },
                sort_keys=False,
            ).rstrip(),
        ]
    return "\n".join(parts) + "\n"


def write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def _users(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", ",").split(",") if part]
    except ValueError:
        raise Refused(
            f"{text!r}: expected Telegram user ids (numbers), separated by commas"
        ) from None


def _non_interactive(args: argparse.Namespace) -> Answers:
    answers = Answers(
        base_url=args.base_url,
        model_api_key=args.model_api_key,
        model=args.model,
        api_key=args.api_key,
        telegram_token=args.telegram_token,
        telegram_users=_users(args.telegram_users or ""),
    )
    if not answers.base_url:
        raise Refused("--base-url: expected the model server's URL (…/v1)")
    if not args.no_check:
        names = check_model_server(answers.base_url, answers.model_api_key)
        if answers.model and names and answers.model not in names:
            raise Refused(f"--model: {answers.model!r} is not among {', '.join(names[:8])}")
        if answers.telegram_token:
            check_telegram(answers.telegram_token, _telegram_base())
    return answers


def _telegram_base() -> str:
    return os.environ.get("TELEGRAM_API_BASE_URL", "https://api.telegram.org")


def _ask(question: str, default: str | None = None) -> str:
    shown = f" [{default}]" if default else ""
    answer = input(f"{question}{shown}: ").strip()
    return answer or (default or "")


def _interactive() -> Answers:
    answers = Answers()
    found = discover(local_servers())
    while True:
        url = _ask(
            "Model server URL (OpenAI-compatible, ending in /v1)",
            found.base_url if found else None,
        )
        key = getpass.getpass("Its API key (Enter for none): ").strip() or None
        try:
            names = check_model_server(url, key)
        except Refused as exc:
            print(f"  {exc}; try again")
            continue
        answers.base_url, answers.model_api_key = url, key
        print(f"  ok: it lists {len(names)} model(s)")
        break
    while True:
        model = _ask("Model", names[0] if names else None) or None
        if model and names and model not in names:
            print(f"  {model!r} is not among {', '.join(names[:8])}; try again")
            continue
        answers.model = model
        break
    answers.api_key = (
        getpass.getpass("API key clients of `serve` must send (Enter for none): ").strip() or None
    )
    if _ask("Set up a Telegram bot? (y/N)", "n").lower().startswith("y"):
        while True:
            token = getpass.getpass("Telegram bot token (from @BotFather): ").strip()
            try:
                bot = check_telegram(token, _telegram_base())
            except Refused as exc:
                print(f"  {exc}; try again")
                continue
            print(f"  ok: @{bot}")
            answers.telegram_token = token
            break
        while True:
            try:
                answers.telegram_users = _users(_ask("Telegram user ids allowed (comma-separated)"))
                break
            except Refused as exc:
                print(f"  {exc}; try again")
    return answers


def run_init(config: Config, args: argparse.Namespace) -> int:
    path = Path(args.output)
    try:
        if path.exists() and not args.force:
            if args.non_interactive:
                raise Refused(f"{path} exists; --force overwrites it")
            if not _ask(f"{path} exists. Overwrite it? (y/N)", "n").lower().startswith("y"):
                print(f"hermes-trio init: {path} left as it was")
                return 0
        answers = _non_interactive(args) if args.non_interactive else _interactive()
        write(path, render(answers))
    except Refused as exc:
        print(f"hermes-trio init: {exc}", file=sys.stderr)
        return 2
    except (EOFError, KeyboardInterrupt):
        print("\nhermes-trio init: stopped; nothing written", file=sys.stderr)
        return 1
    print(f"hermes-trio init: wrote {path} (mode 600); check it with `hermes-trio doctor`")
    return 0
