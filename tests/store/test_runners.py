"""When a process sharing the store counts as gone (pure)."""

from __future__ import annotations

from hermes_trio.store.runners import STALE_AFTER, Runner, RunnerRow, is_dead, this_runner

ME = Runner("host/boot:1:aa", "host/boot", 1)


def row(runner_id: str, host: str, pid: int, seen_at: float) -> RunnerRow:
    return RunnerRow(runner_id, host, pid, seen_at)


def test_no_row_is_gone_and_this_process_never_is() -> None:
    assert is_dead(None, ME, 100.0)
    assert not is_dead(row(ME.id, ME.host, ME.pid, 0.0), ME, 1e9)


def test_on_this_machine_a_missing_pid_is_gone_at_once() -> None:
    fresh = row("host/boot:2:bb", "host/boot", 2, 100.0)
    assert is_dead(fresh, ME, 100.5, pid_alive=lambda pid: False)
    assert not is_dead(fresh, ME, 100.5, pid_alive=lambda pid: True)


def test_elsewhere_only_a_stale_heartbeat_is_gone() -> None:
    other = row("far/boot:2:cc", "far/boot", 2, 100.0)
    # Another machine's pid means nothing here.
    assert not is_dead(other, ME, 100.0 + STALE_AFTER, pid_alive=lambda pid: False)
    assert is_dead(other, ME, 100.0 + STALE_AFTER + 0.1, pid_alive=lambda pid: True)


def test_a_restarted_process_is_a_new_runner() -> None:
    first, second = this_runner(), this_runner()
    assert first.id != second.id and first.pid == second.pid and first.host == second.host
