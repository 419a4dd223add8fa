"""Vector stores that expire, as OpenAI's `expires_after`: `{"anchor": "last_active_at", "days": 1..365}`.

A store's `last_active_at` is written to its record when it is searched or
given files (at most once a minute per process); `expires_at` is that plus the
days. An expired store is deleted (files stay in `/v1/files`) by whichever
worker process looks first; indexes served with `--index` never expire.
"""

from __future__ import annotations

import time

from ragsieve.service.common.errors import ApiError

MAX_DAYS = 365
TOUCH_EVERY_S = 60.0
DAY_S = 86_400


def check_expires_after(value) -> dict | None:
    if value is None:
        return None
    days = value.get("days") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or set(value) != {"anchor", "days"}
        or value["anchor"] != "last_active_at"
        or not isinstance(days, int)
        or isinstance(days, bool)
        or not 1 <= days <= MAX_DAYS
    ):
        raise ApiError(
            400, f'expires_after is {{"anchor": "last_active_at", "days": 1..{MAX_DAYS}}} (or null)', param="expires_after"
        )
    return {"anchor": "last_active_at", "days": days}


def expires_at(meta: dict) -> int | None:
    rule = meta.get("expires_after")
    if not rule:
        return None
    return int((meta.get("last_active_at") or meta.get("created_at") or 0) + rule["days"] * DAY_S)


def expired_stores(catalog, now: float | None = None) -> list[str]:
    now = time.time() if now is None else now
    return [m["id"] for m in catalog.stores() if m["id"] not in catalog.served and (t := expires_at(m)) is not None and t <= now]
