"""Regenerate openai_schemas.json from OpenAI's published OpenAPI spec.

    python tests/spec/extract.py PATH/TO/openai-openapi/openapi.json COMMIT

Keeps only the schemas our wire objects are checked against and every schema
they reference, so the fixture stays small and the suite needs no network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = (
    "Response",
    "ResponseStreamEvent",
    "CreateResponse",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "MCPApprovalRequest",
    "MCPApprovalResponse",
    "MCPApprovalResponseResource",
    "MCPListTools",
    "MCPToolCall",
    "MCPTool",
    "ResponseMCPCallArgumentsDeltaEvent",
    "ResponseMCPCallArgumentsDoneEvent",
    "ResponseMCPCallCompletedEvent",
    "ResponseMCPCallFailedEvent",
    "ResponseMCPCallInProgressEvent",
    "ResponseMCPListToolsCompletedEvent",
    "ResponseMCPListToolsFailedEvent",
    "ResponseMCPListToolsInProgressEvent",
    "ListModelsResponse",
    "Model",
    "ErrorResponse",
    "CompactResource",
    "CompactResponseMethodPublicBody",
)


def _closure(schemas: dict[str, Any]) -> dict[str, Any]:
    seen: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in seen:
                    seen.add(name)
                    walk(schemas[name])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for root in ROOTS:
        seen.add(root)
        walk(schemas[root])
    return {name: schemas[name] for name in sorted(seen)}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    out = {
        "source": "github.com/openai/openai-openapi openapi.json",
        "commit": sys.argv[2],
        "schemas": _closure(spec["components"]["schemas"]),
    }
    target = Path(__file__).with_name("openai_schemas.json")
    target.write_text(json.dumps(out, indent=None, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
