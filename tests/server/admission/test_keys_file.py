"""The keys file and named keys, through the real ``serve`` and ``doctor``
commands: a broken file is refused by where it is broken, never by what
it holds; a name is never given twice; named keys alone are a key for
every check that asks whether the server has one."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import trio
from support import clean_env, run_cli, start_serve

SECRET = "sk-live-9f8e7d6c5b4a3210fedcba"


def config_with(tmp_path: Path, keys_file: Path, extra: str = "") -> None:
    (tmp_path / "config.yaml").write_text(f"api_server:\n  keys_file: '{keys_file}'\n{extra}")


async def serve_refused(tmp_path: Path) -> tuple[int, str]:
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    result = await run_cli(["serve", "--port", "0", "--demo"], env, tmp_path)
    return result.returncode, (result.stdout + result.stderr).decode()


async def test_a_keys_file_with_a_yaml_error_is_named_by_place_never_by_content(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys.yaml"
    # A colon too many on the key's line: YAML's own message quotes it.
    keys.write_text(f"- name: alice\n  key: {SECRET}: oops\n")
    config_with(tmp_path, keys)
    code, out = await serve_refused(tmp_path)
    assert code == 2, out
    assert SECRET not in out and SECRET[:8] not in out
    lines = [line for line in out.splitlines() if "keys_file" in line]
    assert len(lines) == 1, out
    assert str(keys) in lines[0] and "line 2, column" in lines[0], lines[0]


async def test_a_bare_key_in_the_keys_file_is_never_quoted(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"- {SECRET}\n")
    config_with(tmp_path, keys)
    code, out = await serve_refused(tmp_path)
    assert code == 2, out
    assert SECRET not in out and SECRET[:8] not in out
    assert str(keys) in out and "keys_file[0]" in out and "expected a mapping" in out


async def test_a_reload_that_meets_a_broken_file_does_not_log_it(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(json.dumps([{"name": "bob", "key": "sk-bob-good-key"}]))
    config_with(tmp_path, keys)
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=["--demo"])
        keys.write_text(f"- name: carol\n  key: {SECRET}: oops\n")
        served.process.send_signal(signal.SIGHUP)
        with trio.fail_after(10):
            line = await served.wait_for("API keys not reloaded")
        nursery.cancel_scope.cancel()
    assert SECRET not in "\n".join(served.output)
    assert str(keys) in line and "line 2, column" in line


async def test_a_name_given_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(json.dumps([{"name": "alice", "key": "sk-alice-from-file"}]))
    config_with(tmp_path, keys, "  keys:\n    - {name: alice, key: sk-alice-inline-key}\n")
    code, out = await serve_refused(tmp_path)
    assert code == 2, out
    named = [line for line in out.splitlines() if "'alice'" in line]
    assert len(named) == 1, out
    assert str(keys) in named[0] and "api_server.keys" in named[0]
    assert "sk-alice" not in out


async def test_a_named_key_called_default_beside_api_server_key_is_refused(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(json.dumps([{"name": "default", "key": "sk-named-default"}]))
    config_with(tmp_path, keys, "  key: sk-the-single-key\n")
    code, out = await serve_refused(tmp_path)
    assert code == 2, out
    assert "'default'" in out and "api_server.key" in out


async def test_named_keys_alone_are_a_key_for_the_banner_and_the_host_check(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(json.dumps([{"name": "alice", "key": "sk-alice-only-key"}]))
    config_with(tmp_path, keys)
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    foreign = {"Host": "hermes.lan", "Authorization": "Bearer sk-alice-only-key"}
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=["--demo"])
        async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
            keyed = await http.get("/models", headers=foreign)
            # The keys file empties: no key now, so a foreign Host is a
            # rebinding page again.
            keys.write_text("keys: []\n")
            served.process.send_signal(signal.SIGHUP)
            with trio.fail_after(10):
                await served.wait_for("API keys reloaded: 0 key(s)")
            keyless = await http.get("/models", headers=foreign)
        nursery.cancel_scope.cancel()
    banner = next(line for line in served.output if "listening on" in line)
    assert "an API key is required" in banner, banner
    # With a key and no allowed_hosts, any Host may be used (a key is
    # what a rebinding page lacks).
    assert keyed.status_code == 200, keyed.text
    assert keyless.status_code == 403


async def doctor(tmp_path: Path, **env: str) -> tuple[int, str]:
    result = await run_cli(
        ["doctor"],
        clean_env(
            HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1",
            HERMES_DATA_DIR=str(tmp_path / "data"),
            **env,
        ),
        tmp_path,
        within=60,
    )
    out = result.stdout.decode()
    line = next(line for line in out.splitlines() if "api server" in line)
    return result.returncode, line


async def test_doctor_counts_named_keys_and_checks_the_keys_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    config_with(tmp_path, keys)

    keys.write_text(json.dumps([{"name": "alice", "key": "sk-alice-doctor-key"}]))
    _, named = await doctor(tmp_path, API_SERVER_HOST="0.0.0.0")
    assert named.startswith("ok") and "an API key is required" in named, named

    # A keys file that lists nobody is no key: not beyond loopback.
    keys.write_text("keys: []\n")
    _, empty = await doctor(tmp_path, API_SERVER_HOST="0.0.0.0")
    assert empty.startswith("FAIL") and "not a loopback address" in empty, empty

    keys.write_text(f"- name: alice\n  key: {SECRET}: oops\n")
    code, broken = await doctor(tmp_path)
    assert code == 1
    assert broken.startswith("FAIL") and str(keys) in broken and "line 2" in broken, broken
    assert SECRET not in broken


async def test_a_keys_file_emptied_after_the_start_check_leaves_no_server_keyless(
    tmp_path: Path,
) -> None:
    from support import make_config

    from hermes_trio.config import ApiServerConfig, ConfigError
    from hermes_trio.server.run import open_api_server, startup_problem

    keys = tmp_path / "keys.yaml"
    keys.write_text(f"- name: alice\n  key: {SECRET}\n")
    # Beyond this machine (TEST-NET-1: never bound here, the server must
    # refuse before it binds), with named keys only.
    api = ApiServerConfig(host="192.0.2.1", keys_file=str(keys))
    config = make_config("http://127.0.0.1:9/v1", api_server=api)
    assert startup_problem(config) is None
    keys.write_text("[]\n")  # emptied between the check and the server
    try:
        async with open_api_server(config, port=0):
            raise AssertionError("served beyond loopback without a key")
    except ConfigError as refused:
        assert "not a loopback address: set an API key" in str(refused)
