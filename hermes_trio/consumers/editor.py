"""Progressive message editor: shows a turn's stream in a chat, editing one
message as text arrives.

This is the trio shell around ``EditorPlan`` (all decisions live there). Two
sibling tasks share the plan: one drains the event channel into it — it never
waits on the platform, so a slow chat never slows the agent — and one makes
the platform calls the plan asks for, one at a time, sleeping on the trio
clock until the plan's next due time or new input.

Run it as the consumer task in the turn's nursery::

    report = await run_editor(receive_channel, messenger, settings)

When the turn is cancelled, a shielded cleanup with a deadline leaves the
shown text without cursor plus an "interrupted" note, then ``Cancelled``
propagates.

On a platform with drafts (``Capabilities.drafts``) the growing text is
shown in the chat's draft instead of an edited message, and the final text
is sent as messages; a refused draft turns this turn to edits
(``EditorPlan.drafts_refused``).

The gateway adds its own notices to what the turn says (``GatewayNotice``):
``notices`` are shown a given number of seconds after the editor starts (at
once for "your message waited while I was offline", later for "still
working"), and ``interrupt_notice`` replaces the "interrupted" note when it
returns one (the gateway is shutting down, not the user stopping the turn).
An ``EditorControl`` changes what a running editor shows from outside (the
gateway's ``/verbose`` turns tool progress on or off mid-turn).

A messenger with a ``render_event`` method (``EventRenderer``, see
:mod:`hermes_trio.consumers.rendering`) is asked how to show each side
event (tool lines, notices, the compaction line, a block of reasoning)
before the plan takes it: its own text, nothing, or ``DEFAULT``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import trio

from hermes_trio.consumers.editor_plan import Action, EditorPlan, EditorReport, EditorSettings
from hermes_trio.consumers.messenger import (
    DraftMessenger,
    DraftRefused,
    Messenger,
    PlatformError,
    RateLimited,
)
from hermes_trio.consumers.rendering import (
    DEFAULT,
    RENDERED_EVENTS,
    EventRenderer,
    Rendering,
    check_rendering,
)
from hermes_trio.events import GatewayNotice, ReasoningChunk, StreamEvent, TurnFinished
from hermes_trio.exception_groups import leaves

__all__ = ["EditorControl", "run_editor"]


class _Driver:
    def __init__(self, plan: EditorPlan, messenger: Messenger, settings: EditorSettings) -> None:
        self._plan = plan
        self._messenger = messenger
        self._settings = settings
        self._changed = trio.Event()
        self._renderer = messenger if isinstance(messenger, EventRenderer) else None
        # A renderer is asked about a whole block of reasoning, once it ended.
        self._reasoning: list[str] = []

    def _notify(self) -> None:
        self._changed.set()

    def shown(self, event: StreamEvent) -> Rendering:
        """How the messenger's renderer wants ``event`` shown."""
        if self._renderer is None or not isinstance(event, RENDERED_EVENTS):
            return DEFAULT
        return check_rendering(self._renderer.render_event(event), self._renderer)

    def _feed(self, event: StreamEvent) -> None:
        if self._reasoning and not isinstance(event, ReasoningChunk):
            block = ReasoningChunk("".join(self._reasoning))
            self._reasoning.clear()
            self._plan.feed(block, trio.current_time(), self.shown(block))
        if isinstance(event, ReasoningChunk) and self._renderer is not None:
            self._reasoning.append(event.text)
            return
        self._plan.feed(event, trio.current_time(), self.shown(event))
        self._notify()

    def show_tools(self, on: bool) -> None:
        self._plan.show_tools(on, trio.current_time())
        self._notify()

    async def pump(self, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        """Feed every event to the plan as soon as it arrives."""
        try:
            async with receive:
                async for event in receive:
                    self._feed(event)
                    if isinstance(event, TurnFinished):
                        return
            # The stream ended without ``TurnFinished``: the turn was cut off.
            self._plan.interrupt(trio.current_time())
        finally:
            self._notify()

    def note_for(self, notice: GatewayNotice | None) -> str | None:
        """The note a cut-off turn ends with instead of "interrupted"."""
        if notice is None:
            return None
        shown = self.shown(notice)
        return notice.text if shown is DEFAULT else shown

    async def show_notices(self, notices: Sequence[tuple[float, GatewayNotice]]) -> None:
        """Feed each notice to the plan ``delay`` seconds after the start,
        unless the turn is over by then."""
        start = trio.current_time()
        for delay, notice in sorted(notices, key=lambda item: item[0]):
            await trio.sleep_until(start + delay)
            if self._plan.finished:
                return
            self._feed(notice)

    async def deliver(self) -> None:
        """Make the plan's platform calls until nothing more is owed."""
        plan = self._plan
        while not plan.done:
            now = trio.current_time()
            action = plan.next_action(now)
            if action is None:
                deadline = plan.wake_at(now)
                with trio.move_on_at(deadline):
                    await self._changed.wait()
                # Anything that changed the plan is looked at on the next pass.
                self._changed = trio.Event()
                continue
            await self._perform(action)

    async def _perform(self, action: Action) -> None:
        plan, messenger = self._plan, self._messenger
        # Shielded so a cancelled turn never leaves a call half done with an
        # unknown outcome (a send whose message id we never learn would be a
        # duplicate message later); bounded so cancellation still lands.
        with trio.move_on_after(self._settings.call_timeout, shield=True) as scope:
            try:
                message_id: str | None = None
                if action.kind == "send":
                    message_id = await messenger.send(action.text)
                elif action.kind == "edit":
                    assert action.message_id is not None
                    await messenger.edit(action.message_id, action.text, final=action.final)
                elif action.kind == "delete":
                    assert action.message_id is not None
                    await messenger.delete(action.message_id)
                elif action.kind == "draft":
                    await cast(DraftMessenger, messenger).draft(action.text)
                else:
                    await messenger.typing()
            except RateLimited as exc:
                plan.rate_limited(action, exc.retry_after, trio.current_time())
                return
            except DraftRefused:
                plan.drafts_refused(action, trio.current_time())
                return
            except PlatformError as exc:
                plan.failed(action, str(exc), trio.current_time())
                return
            plan.succeeded(action, trio.current_time(), message_id)
        if scope.cancelled_caught:
            plan.failed(action, "timed out", trio.current_time())


class EditorControl:
    """Changes a running editor's display from outside its turn. Pass it
    to ``run_editor``; what is asked before the editor starts applies when
    it starts, and nothing after it ended."""

    def __init__(self) -> None:
        self._driver: _Driver | None = None
        self._plan: EditorPlan | None = None
        self._show_tools: bool | None = None

    @property
    def hinted(self) -> bool:
        """The editor showed its ``long_tool_hint``; known even when the
        editor was cancelled before it could return its report."""
        return self._plan is not None and self._plan.hinted

    def show_tools(self, on: bool) -> None:
        """Show tool progress (or stop showing it) for the rest of the turn."""
        self._show_tools = on
        if self._driver is not None:
            self._driver.show_tools(on)

    def _attach(self, driver: _Driver | None) -> None:
        self._driver = driver
        if driver is None:
            return
        self._plan = driver._plan
        if self._show_tools is not None:
            driver.show_tools(self._show_tools)


async def run_editor(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    messenger: Messenger,
    settings: EditorSettings = EditorSettings(),  # noqa: B008 - frozen, never mutated
    *,
    notices: Sequence[tuple[float, GatewayNotice]] = (),
    interrupt_notice: Callable[[], GatewayNotice | None] | None = None,
    control: EditorControl | None = None,
) -> EditorReport:
    """Show the turn on ``receive`` through ``messenger``; return what was delivered.

    Ends after ``TurnFinished`` once the final text is acknowledged (or given
    up on). If the channel closes without ``TurnFinished`` the turn counts as
    interrupted. Closes ``receive``. ``notices`` are ``(seconds after the
    start, notice)``; ``interrupt_notice()``, asked when the turn is cut off,
    may give the note to show instead of the "interrupted" one; ``control``
    reaches the editor while it runs.
    """
    if messenger.capabilities.drafts and not callable(getattr(messenger, "draft", None)):
        raise TypeError(f"{messenger!r} says it has drafts but has no draft() method")
    plan = EditorPlan(settings, messenger.capabilities)
    driver = _Driver(plan, messenger, settings)
    cut_by: BaseException | None = None
    if control is not None:
        control._attach(driver)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.pump, receive)
            if notices:
                nursery.start_soon(driver.show_notices, notices)
            await driver.deliver()
            # Notices still waiting are for a turn that is over.
            nursery.cancel_scope.cancel()
    except BaseException as exc:
        cut_by = exc
        raise
    finally:
        if not plan.done:
            # Cancelled (or failed): the turn is cut off, but the chat must not
            # keep a cursor. Whatever raised is re-raised after this block.
            with trio.move_on_after(settings.cleanup_deadline, shield=True):
                note = None
                if interrupt_notice is not None and _only_cancelled(cut_by):
                    # A crash is no interruption: it is told as the error it is.
                    note = driver.note_for(interrupt_notice())
                plan.forget_in_flight()
                plan.interrupt(trio.current_time(), note)
                await driver.deliver()
        if control is not None:
            control._attach(None)
    return plan.report()


def _only_cancelled(exc: BaseException | None) -> bool:
    return exc is not None and all(isinstance(leaf, trio.Cancelled) for leaf in leaves(exc))
