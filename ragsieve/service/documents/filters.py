"""OpenAI's attribute filters (vector store search) evaluated on file attributes, and attribute limits.

A comparison filter is `{"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key", "value"}`, a
compound one `{"type": "and"|"or", "filters": [...]}` (nested up to `MAX_DEPTH`). A filter selects
files; the search then runs over their chunks only (a `Where` with the files' source prefixes).
"""

from __future__ import annotations

import operator
from typing import Any

from ragsieve.service.common.errors import ApiError

MAX_DEPTH = 5
MAX_ATTRIBUTES = 16  # OpenAI's limits: 16 keys, keys up to 64 characters, string values up to 512
MAX_KEY, MAX_VALUE = 64, 512
_ORDER = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def check_attributes(attributes: Any) -> dict:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict) or len(attributes) > MAX_ATTRIBUTES:
        raise ApiError(400, f"attributes must be an object of at most {MAX_ATTRIBUTES} keys", param="attributes")
    for key, value in attributes.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
            raise ApiError(400, f"attribute keys are 1..{MAX_KEY} characters", param="attributes")
        if not isinstance(value, (str, int, float, bool)) or (isinstance(value, str) and len(value) > MAX_VALUE):
            raise ApiError(
                400, f"attribute {key!r} must be a string (up to {MAX_VALUE} characters), number or boolean", param="attributes"
            )
    return attributes


def matches(spec: Any, attributes: dict, depth: int = 0) -> bool:
    """Whether a file with `attributes` passes the filter `spec` (ApiError 400 on a malformed filter)."""
    if depth > MAX_DEPTH or not isinstance(spec, dict):
        raise ApiError(400, f"filters must be objects nested at most {MAX_DEPTH} deep", param="filters")
    kind = spec.get("type")
    if kind in ("and", "or"):
        parts = spec.get("filters")
        if not isinstance(parts, list) or not parts:
            raise ApiError(400, f"an {kind!r} filter needs a non-empty list `filters`", param="filters")
        results = [matches(p, attributes, depth + 1) for p in parts]  # every part checked, even after a decision
        return all(results) if kind == "and" else any(results)
    key, value = spec.get("key"), spec.get("value")
    if not isinstance(key, str) or "value" not in spec:
        raise ApiError(400, "a comparison filter needs `key` and `value`", param="filters")
    have = attributes.get(key)
    if kind == "eq":
        return key in attributes and have == value
    if kind == "ne":
        return have != value
    if kind in ("in", "nin"):
        if not isinstance(value, list):
            raise ApiError(400, f"an {kind!r} filter takes a list `value`", param="filters")
        return (have in value) == (kind == "in") if key in attributes else kind == "nin"
    if kind in _ORDER:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ApiError(400, f"a {kind!r} filter compares numbers", param="filters")
        return isinstance(have, (int, float)) and not isinstance(have, bool) and _ORDER[kind](have, value)
    raise ApiError(400, f"unknown filter type {kind!r}: eq, ne, gt, gte, lt, lte, in, nin, and, or", param="filters")


def equal_all(wanted: dict, attributes: dict) -> bool:
    """The `where.attributes` of ragsieve's own routes: every key present and equal."""
    return all(k in attributes and attributes[k] == v for k, v in wanted.items())
