"""The Discord Gateway protocol as a state machine that never touches a
socket or a clock.

The trio shell around it (``adapter.py``) opens websockets, feeds every
received text frame to :meth:`GatewayProtocol.receive` with the current
time, calls :meth:`GatewayProtocol.heartbeat_due` when
:attr:`GatewayProtocol.heartbeat_at` has come, and tells it when a socket
closed (:meth:`GatewayProtocol.closed`). The answers are actions: frames to
send, dispatches to handle, "close this socket and open another", or a
fatal error. Times are plain floats in seconds, so the tests drive it with
any clock.

The session (id, resume URL, last sequence) outlives a socket: after a
dropped connection, a RECONNECT (op 7) or a resumable INVALID_SESSION the
next socket goes to ``resume_gateway_url`` and sends RESUME, and Discord
replays what was dispatched meanwhile.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Final, cast

from .api_types import GatewayPayload, IdentifyProperties, SendPayload

__all__ = [
    "DIRECT_MESSAGES",
    "GUILD_MESSAGES",
    "INTENTS",
    "MESSAGE_CONTENT",
    "RESUME_CLOSE_CODE",
    "TOKEN_REJECTED",
    "Action",
    "Dispatch",
    "Fatal",
    "GatewayProtocol",
    "Reconnect",
    "Send",
    "gateway_url",
]

GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12
MESSAGE_CONTENT = 1 << 15
INTENTS = GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT

# Opcodes.
DISPATCH: Final = 0
HEARTBEAT: Final = 1
IDENTIFY: Final = 2
RESUME: Final = 6
RECONNECT: Final = 7
INVALID_SESSION: Final = 9
HELLO: Final = 10
HEARTBEAT_ACK: Final = 11

# Closing with 1000 or 1001 ends the session on Discord's side; any other
# code keeps it resumable, so a socket we drop to resume is closed with this.
RESUME_CLOSE_CODE = 4000

# Close codes after which the session cannot be resumed but a fresh
# IDENTIFY works: invalid sequence, session timed out.
_FRESH_SESSION_CODES = frozenset({4007, 4009})

TOKEN_REJECTED = (
    "discord: the bot token was rejected; check DISCORD_BOT_TOKEN / platforms.discord.token"
)
_FATAL_CODES: dict[int, str] = {
    4004: TOKEN_REJECTED,
    4010: "discord: the gateway refused the connection (invalid shard, close code 4010)",
    4011: "discord: the bot is in too many servers for one connection "
    "(sharding required, close code 4011); hermes-trio does not shard",
    4012: "discord: the gateway refused the API version (close code 4012)",
    4013: "discord: the gateway refused the requested intents as invalid (close code 4013)",
    4014: "discord: the bot may not use the Message Content intent (close code 4014); "
    "enable it in the Developer Portal (your application → Bot → Privileged Gateway "
    "Intents → Message Content Intent) and restart the gateway",
}


def gateway_url(base: str) -> str:
    """``base`` (from ``/gateway/bot`` or READY) with the version and encoding we speak."""
    return base.split("?", 1)[0].rstrip("/") + "/?v=10&encoding=json"


@dataclass(frozen=True, slots=True)
class Send:
    """Send this payload as one text frame."""

    payload: SendPayload

    def text(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Dispatch:
    """An event (op 0): ``name`` is its ``t`` (``MESSAGE_CREATE``, ``READY``…)."""

    name: str
    data: Any
    seq: int | None


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Close this socket and open another after ``delay`` seconds; it resumes
    when the session allows. ``expected``: Discord asked for it (op 7, op 9),
    so it is no outage. ``close``: close the socket ourselves (it is still
    open), with :data:`RESUME_CLOSE_CODE`."""

    reason: str
    delay: float = 0.0
    expected: bool = False
    close: bool = True


@dataclass(frozen=True, slots=True)
class Fatal:
    """The gateway refused us for a reason no reconnect can fix; ``message``
    is the one line for the user. ``credentials``: the token is wrong."""

    code: int
    message: str
    credentials: bool = False


Action = Send | Dispatch | Reconnect | Fatal


@dataclass
class _Session:
    session_id: str
    resume_url: str | None


@dataclass
class GatewayProtocol:
    """One bot's gateway session across as many sockets as it takes.

    ``jitter`` and ``invalid_session_wait`` come from ``rng`` (give a seeded
    ``random.Random`` for repeatable tests).
    """

    token: str
    intents: int = INTENTS
    rng: random.Random = field(default_factory=random.Random)
    properties: IdentifyProperties = field(
        default_factory=lambda: IdentifyProperties(
            os="linux", browser="hermes-trio", device="hermes-trio"
        )
    )

    seq: int | None = None
    """The last sequence number dispatched to us (heartbeats and RESUME carry it)."""
    bot_user_id: str | None = None
    heartbeat_interval: float | None = None
    """Seconds, from HELLO; None until this socket's HELLO."""
    heartbeat_at: float | None = None
    """When the next heartbeat is due on this socket; None before HELLO."""
    last_heartbeat_sent: float | None = None
    latency: float | None = None
    """Seconds between the last heartbeat and its ACK."""
    _session: _Session | None = None
    _acked: bool = True
    _identified: bool = False

    # -- session -----------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session.session_id if self._session else None

    @property
    def resume_url(self) -> str | None:
        return self._session.resume_url if self._session else None

    @property
    def can_resume(self) -> bool:
        return self._session is not None and self.seq is not None

    def url(self, gateway: str) -> str:
        """Where the next socket goes: the session's resume URL when it can
        resume, else ``gateway`` (from ``/gateway/bot``)."""
        if self.can_resume and self.resume_url:
            return gateway_url(self.resume_url)
        return gateway_url(gateway)

    def forget_session(self) -> None:
        """The next socket identifies afresh (and dispatches start over at 1)."""
        self._session = None
        self.seq = None

    # -- one socket --------------------------------------------------------

    def connected(self) -> None:
        """A new socket is open; wait for its HELLO."""
        self.heartbeat_interval = None
        self.heartbeat_at = None
        self.last_heartbeat_sent = None
        self._acked = True
        self._identified = False

    def receive(self, text: str | bytes, now: float) -> list[Action]:
        """Everything one received frame calls for."""
        try:
            parsed = json.loads(text)
        except ValueError:
            return []
        if not isinstance(parsed, dict):
            return []
        # A gateway frame from here on; each field is still checked where read.
        payload = cast(GatewayPayload, parsed)
        op = payload.get("op")
        data = payload.get("d")
        if op == DISPATCH:
            return self._dispatch(payload, data)
        if op == HELLO:
            return self._hello(data, now)
        if op == HEARTBEAT_ACK:
            self._acked = True
            if self.last_heartbeat_sent is not None:
                self.latency = now - self.last_heartbeat_sent
            return []
        if op == HEARTBEAT:
            # Discord asks for one now; the regular schedule stays as it is.
            return [self._heartbeat_frame()]
        if op == RECONNECT:
            return [Reconnect("the gateway asked to reconnect", expected=True)]
        if op == INVALID_SESSION:
            if data is True and self.can_resume:
                return [Reconnect("the session was invalidated (resumable)", expected=True)]
            self.forget_session()
            # Discord asks for a random wait of 1 to 5 s before identifying.
            wait = self.rng.uniform(1.0, 5.0)
            return [Reconnect("the session was invalidated", delay=wait, expected=True)]
        return []

    def heartbeat_due(self, now: float) -> list[Action]:
        """Call when :attr:`heartbeat_at` has come. A heartbeat whose ACK never
        came means the connection is a zombie: drop it and resume."""
        if self.heartbeat_interval is None:
            return []
        if not self._acked:
            self.heartbeat_at = None
            return [Reconnect("no heartbeat ACK from the gateway (zombie connection)")]
        self._acked = False
        self.last_heartbeat_sent = now
        self.heartbeat_at = now + self.heartbeat_interval
        return [self._heartbeat_frame()]

    def closed(self, code: int | None) -> Reconnect | Fatal:
        """The socket closed (``code`` None: it broke without a close frame)."""
        self.heartbeat_at = None
        if code is not None and code in _FATAL_CODES:
            return Fatal(code, _FATAL_CODES[code], credentials=code == 4004)
        if code in _FRESH_SESSION_CODES:
            self.forget_session()
        shown = "without a close code" if code is None else f"with code {code}"
        return Reconnect(f"the gateway connection closed {shown}", close=False)

    # -- internals ---------------------------------------------------------

    def _hello(self, data: Any, now: float) -> list[Action]:
        interval_ms = data.get("heartbeat_interval") if isinstance(data, dict) else None
        if not isinstance(interval_ms, int | float) or interval_ms <= 0:
            return [Reconnect("the gateway sent a HELLO without a heartbeat interval")]
        self.heartbeat_interval = interval_ms / 1000.0
        # The first beat after interval × jitter, so many clients that
        # reconnect together do not beat together.
        self.heartbeat_at = now + self.heartbeat_interval * self.rng.random()
        self._acked = True
        if self._identified:
            return []
        self._identified = True
        if self.can_resume:
            assert self._session is not None
            return [
                Send(
                    {
                        "op": RESUME,
                        "d": {
                            "token": self.token,
                            "session_id": self._session.session_id,
                            "seq": self.seq,
                        },
                    }
                )
            ]
        self.forget_session()
        return [
            Send(
                {
                    "op": IDENTIFY,
                    "d": {
                        "token": self.token,
                        "intents": self.intents,
                        "properties": IdentifyProperties(**self.properties),
                    },
                }
            )
        ]

    def _dispatch(self, payload: GatewayPayload, data: Any) -> list[Action]:
        seq = payload.get("s")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self.seq = seq if self.seq is None else max(self.seq, seq)
        else:
            seq = None
        name = payload.get("t")
        if not isinstance(name, str):
            return []
        if name == "READY" and isinstance(data, dict):
            session_id = data.get("session_id")
            resume_url = data.get("resume_gateway_url")
            if isinstance(session_id, str):
                self._session = _Session(
                    session_id, resume_url if isinstance(resume_url, str) else None
                )
            user = data.get("user")
            if isinstance(user, dict) and user.get("id") is not None:
                self.bot_user_id = str(user["id"])
        return [Dispatch(name, data, seq)]

    def _heartbeat_frame(self) -> Send:
        return Send({"op": HEARTBEAT, "d": self.seq})
