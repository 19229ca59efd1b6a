"""Slack: the adapter (``adapter.py``, Socket Mode) with which envelopes are
questions (``events.py``), the Web API (``api.py``), the messengers
(``send.py``) and the mrkdwn converter (``format.py``)."""

from .adapter import SlackAdapter

__all__ = ["SlackAdapter"]
