"""`hermes-trio serve` as a user runs it: a real process, real signals."""

from __future__ import annotations

import signal
import socket

import trio
from support import SHORT_SHUTDOWN, child_patches, clean_env, run_cli, start_serve

from hermes_trio.testing import TextReply, open_scripted_server


def env_without_model(tmp_path) -> dict[str, str]:
    return clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))


async def test_refuses_to_start_without_a_model_server(tmp_path) -> None:
    result = await run_cli(["serve", "--port", "0"], env_without_model(tmp_path), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    for name in ("model.base_url", "HERMES_MODEL_BASE_URL", "OPENAI_BASE_URL"):
        assert name in lines[0]


async def test_refuses_a_public_host_without_a_key(tmp_path) -> None:
    env = env_without_model(tmp_path)
    env["HERMES_MODEL_BASE_URL"] = "http://127.0.0.1:9/v1"
    result = await run_cli(["serve", "--host", "0.0.0.0", "--port", "0"], env, tmp_path)
    assert result.returncode == 2
    assert "API_SERVER_KEY" in result.stderr.decode()


async def test_bad_config_is_one_line(tmp_path) -> None:
    (tmp_path / "config.yaml").write_text("streaming: {enabled: sometimes}\n")
    result = await run_cli(["serve"], env_without_model(tmp_path), tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        "hermes-trio: streaming.enabled: expected true or false, got str 'sometimes'"
    )


async def test_sigterm_exits_quickly_with_a_stuck_client(tmp_path) -> None:
    # A long answer and a client that never reads: the server's writes back up.
    long_answer = TextReply(text="lorem ipsum " * 100_000)
    async with open_scripted_server([long_answer]) as model:
        env = env_without_model(tmp_path)
        env["HERMES_MODEL_BASE_URL"] = model.base_url
        # The stuck connection is cut when the grace ends, however long.
        env.update(child_patches(SHORT_SHUTDOWN))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            assert any(model.base_url in line for line in served.output)
            host_port = served.base_url.split("//")[1].split("/")[0]
            host, port = host_port.split(":")
            stuck = socket.create_connection((host, int(port)))
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            body = b'{"messages":[{"role":"user","content":"go"}],"stream":true}'
            stuck.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await model.wait_request(1)
            await trio.sleep(0.5)  # let the write side fill up
            served.process.send_signal(signal.SIGTERM)
            with trio.fail_after(8):
                code = await served.process.wait()
            stuck.close()
            nursery.cancel_scope.cancel()
    assert code == 0
    assert any("SIGTERM received" in line for line in served.output)


async def test_warns_once_when_the_model_server_is_down(tmp_path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    env = env_without_model(tmp_path)
    env["HERMES_MODEL_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path)
        with trio.fail_after(10):
            await served.wait_for("not reachable")
        served.process.send_signal(signal.SIGINT)
        with trio.fail_after(8):
            code = await served.process.wait()
        nursery.cancel_scope.cancel()
    assert code == 0
    assert sum("not reachable" in line for line in served.output) == 1


async def test_credentials_in_the_model_url_are_never_printed(tmp_path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    env = env_without_model(tmp_path)
    env["HERMES_MODEL_BASE_URL"] = f"http://someone:Sup3rSecretPassw0rd@127.0.0.1:{port}/v1"
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path)
        with trio.fail_after(10):
            await served.wait_for("not reachable")
        served.process.send_signal(signal.SIGINT)
        with trio.fail_after(8):
            await served.process.wait()
        nursery.cancel_scope.cancel()
    printed = "\n".join(served.output)
    assert "Sup3rSecretPassw0rd" not in printed and "someone" not in printed
    assert f"model server http://127.0.0.1:{port}/v1" in printed
