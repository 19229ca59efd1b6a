"""``--demo``: the built-in scripted model, in this process, instead of a
model server. Everything else is the real thing — the agent, streaming,
the API server, the chat page — but the answers are canned, and every
start says so."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..agent import Agent, open_agent
from ..config import Config

__all__ = ["DEMO_BANNER", "DEMO_URL", "WORD_DELAY", "agent_for", "demo_config", "is_demo"]

# Never resolvable (RFC 2606): nothing can be sent there by mistake.
DEMO_URL = "http://demo.hermes-trio.invalid/v1"
DEMO_MODEL = "demo"
WORD_DELAY = 0.03
"""Seconds between the canned answer's words: a readable stream."""
DEMO_WINDOW = 32768
"""The demo model's context window, as its model card says it."""
DEMO_BANNER = (
    "DEMO MODE: answers are canned by the built-in scripted model, not a language model "
    "(run with a model server for real answers: see `hermes-trio init`)"
)
_ANSWER = (
    "This is hermes-trio's demo mode: a canned answer, streamed token by token the way a "
    "real model's would be. Everything you see — the API, sessions, stopping mid-answer, "
    "the chat page — is the real server; only the words are scripted. Point hermes-trio at "
    "a model server (Ollama, LM Studio, llama.cpp, vLLM or any OpenAI-compatible URL) for "
    "real answers."
)


def demo_config(config: Config) -> Config:
    return config.replace(
        model=dataclasses.replace(config.model, base_url=DEMO_URL, name=DEMO_MODEL)
    )


def is_demo(config: Config) -> bool:
    return config.model.base_url == DEMO_URL


@asynccontextmanager
async def agent_for(config: Config) -> AsyncIterator[Agent]:
    """The agent of ``config``: on the scripted model in demo mode."""
    if not is_demo(config):
        async with open_agent(config) as agent:
            yield agent
        return
    # Imported here: only demo mode loads the testing kit's scripted model.
    from ..testing.script import TextReply
    from ..testing.scripted_model.double import ModelDouble

    words = [f"{word} " for word in _ANSWER.split(" ")]
    words[-1] = words[-1].rstrip()
    reply = TextReply(tokens=words, delay=WORD_DELAY)
    # Its card says its window, so a new user's first turn is not told that
    # a window is assumed.
    model = ModelDouble(default=reply, model=DEMO_MODEL, record=False, context_window=DEMO_WINDOW)
    async with open_agent(config, transport=model) as agent:
        yield agent
