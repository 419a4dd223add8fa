"""The request and reply shapes of the OpenAI chat API: strict schemas, Retry-After, the schema note."""
from __future__ import annotations

import copy
import json
from typing import Any

from ragsieve.tools.http_json import retry_after_s  # noqa: F401  (re-exported: the chat client uses it)

_NAMED_SUBSCHEMAS = ("properties", "$defs", "definitions", "patternProperties")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Copy of `schema` made OpenAI-strict-compatible: every object with `properties`
    closed (additionalProperties false) with all of them required; `default` dropped.
    Maps (`additionalProperties` given as a schema) are left as they are."""
    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "default":
                continue
            if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
                out[key] = {name: fix(sub) for name, sub in value.items()}
            else:
                out[key] = fix(value)
        is_object = "properties" in out or out.get("type") == "object"
        if is_object and not isinstance(out.get("additionalProperties"), dict):
            out["additionalProperties"] = False
            out["required"] = list(out.get("properties", {}))
        return out
    return fix(copy.deepcopy(schema))


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _safe_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64]
    return cleaned or "reply"


def _with_schema_instruction(messages: list[dict[str, str]], json_schema: dict[str, Any]) -> list[dict[str, str]]:
    from ragsieve.agent.llm.templates import default_renderer

    note = default_renderer().render("json_schema_note", schema=json.dumps(json_schema, separators=(",", ":")))
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content', '')}\n\n{note}"
        return [first] + list(messages[1:])
    return [{"role": "system", "content": note}] + list(messages)
