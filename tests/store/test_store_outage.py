"""A PostgreSQL store whose server goes away and comes back, under the real
``hermes-trio serve``: a loopback proxy in front of the real PostgreSQL is
closed (new connections refused, open ones cut) and opened again."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import trio
from support import clean_env, start_serve
from tcp_proxy import open_tcp_proxy

PG_BASE = "postgresql://postgres@127.0.0.1:5432/test"
# The pool's own timeout: a request that waited this long was not refused
# at once. The bound each refusal is held to, far under it; the figure
# itself is measured in bench, not asserted.
POOL_TIMEOUT = 10.0
AT_ONCE = 3.0


@pytest.fixture
def schema() -> Iterator[str]:
    try:
        with psycopg.connect(PG_BASE, connect_timeout=3):
            pass
    except psycopg.Error:
        pytest.fail(f"PostgreSQL is not running at {PG_BASE} (.ci/run starts it)")
    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")  # type: ignore[arg-type]
    try:
        yield name
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")  # type: ignore[arg-type]


async def test_requests_fail_at_once_while_the_database_is_gone_and_work_after(
    tmp_path: Path, schema: str
) -> None:
    async with open_tcp_proxy(5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
        env = clean_env(HERMES_STORE_URL=url, HERMES_DATA_DIR=str(tmp_path / "data"))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path, args=["--demo"])
            async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:

                async def lookup() -> tuple[httpx.Response, float]:
                    began = trio.current_time()
                    reply = await http.get("/responses/resp_nowhere")
                    return reply, trio.current_time() - began

                before, _ = await lookup()
                proxy.down()
                # The first request (or the heartbeat) meets the outage.
                first, _ = await lookup()
                with trio.fail_after(POOL_TIMEOUT + 5):
                    await served.wait_for("cannot be reached")
                during = [await lookup() for _ in range(5)]
                # Each refused at once, not after the pool's timeout.
                assert max(took for _, took in during) < AT_ONCE, [t for _, t in during]
                await proxy.up()
                with trio.fail_after(15):
                    await served.wait_for("works again")
                after, _ = await lookup()
            nursery.cancel_scope.cancel()
    assert before.status_code == 404
    assert first.status_code == 503
    for reply, _ in during:
        assert reply.status_code == 503, reply.text
        error = reply.json()["error"]
        assert error["code"] == "store_unreachable" and error["type"]
        assert set(error) == {"message", "type", "param", "code"}
    assert after.status_code == 404, after.text
    log = "\n".join(served.output)
    assert log.count("cannot be reached") == 1, log
    # The URL is shown (a user name alone is no secret to redact).
    assert f"postgresql://127.0.0.1:{proxy.port}/test" in log
    assert "works again" in log
