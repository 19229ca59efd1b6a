"""What every Python client script shares: the config from argv, JSON-line
output, and one line describing an exception instead of a bare traceback.

Run as ``<env>/bin/python <script> <case> '<config json>'``; the config holds
at least ``base_url`` (ending in ``/v1``) and ``api_key``.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

_T0 = time.monotonic()


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout; ``t`` is seconds since the script started."""
    fields = {"event": event, "t": round(time.monotonic() - _T0, 4), **fields}
    print(json.dumps(fields, default=repr), flush=True)


def now() -> float:
    return time.monotonic() - _T0


def main(cases: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in cases:
        print(f"usage: {sys.argv[0]} {{{'|'.join(cases)}}} CONFIG_JSON", file=sys.stderr)
        sys.exit(2)
    config = json.loads(sys.argv[2])
    try:
        result = cases[sys.argv[1]](config)
        if hasattr(result, "__await__"):
            import asyncio

            async def wait() -> Any:
                return await result

            asyncio.run(wait())
    except BaseException as exc:
        chain = []
        cause: BaseException | None = exc
        while cause is not None and len(chain) < 4:
            chain.append(f"{type(cause).__name__}: {cause}")
            cause = cause.__cause__ or cause.__context__
        emit(
            "exception",
            type=type(exc).__name__,
            message=str(exc)[:2000],
            chain=chain,
            status=getattr(exc, "status_code", None),
            body=getattr(exc, "body", None),
        )
        traceback.print_exc()
        sys.exit(1)
    emit("done")
