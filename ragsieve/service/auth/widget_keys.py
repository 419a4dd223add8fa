"""Widget keys: public keys for the embeddable widget, each limited to named indexes, origins and a rate.

A widget key is published in a web page's `<script>` tag, so it is not a
secret: what it may do is bounded instead. It reaches only the assistant
routes (`/ui/api/*`: ask, feedback) of the indexes it names, only from a
browser page on one of its origins (CORS and an Origin check on every call),
at most `requests_per_minute` calls per key. It is unknown to every `/v1`
route (an API key ring never holds it), so it can neither write nor read
another index. They live in the keys file beside the API keys:

    [widget_keys."pk-docs-site-2f9a61"]
    indexes = ["docs"]
    origins = ["https://docs.example.com"]
    requests_per_minute = 30          # the whole key (every visitor together)
    visitor_requests_per_minute = 10  # optional: one client address (default 10, at most the key's rate)
    plans = ["fast"]                   # optional: plans the widget may ask for (default: the index's own)
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ragsieve.agent.errors import UsageError
from ragsieve.service.auth.keys import read_keys_file

MAX_VISITORS = 10_000


def normal_origin(origin: str) -> str | None:
    """`scheme://host[:port]` in lower case, or None when `origin` is not an http(s) origin."""
    parts = urlsplit(origin.strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username
    ):
        return None
    default = {"http": 80, "https": 443}[parts.scheme]
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


@dataclass
class RateLimit:
    """A token bucket: `per_minute` calls, refilled continuously; thread-safe."""

    per_minute: int
    _tokens: float = field(default=-1.0, init=False)
    _at: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def take(self, now: float | None = None) -> float:
        """0 when a call may go now (and counts it), else the seconds until one may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._tokens < 0:
                self._tokens, self._at = float(self.per_minute), now
            self._tokens = min(float(self.per_minute), self._tokens + (now - self._at) * self.per_minute / 60.0)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) * 60.0 / self.per_minute


@dataclass
class WidgetKey:
    key: str
    indexes: frozenset[str]
    origins: frozenset[str]
    requests_per_minute: int
    plans: frozenset[str] = frozenset()  # plans a call may name; none: only the index's default plan
    visitor_requests_per_minute: int = 10
    limit: RateLimit = field(init=False)
    _visitors: OrderedDict = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.limit = RateLimit(self.requests_per_minute)
        self.visitor_requests_per_minute = min(self.visitor_requests_per_minute, self.requests_per_minute)
        self._visitors = OrderedDict()
        self._lock = threading.Lock()

    def take(self, visitor: str, now: float | None = None) -> float:
        """0 when this visitor may call now (counted against the visitor and the key), else seconds to wait.
        One visitor cannot spend the whole key's rate; the visitors remembered are bounded (LRU)."""
        with self._lock:
            bucket = self._visitors.pop(visitor, None) or RateLimit(self.visitor_requests_per_minute)
            self._visitors[visitor] = bucket
            while len(self._visitors) > MAX_VISITORS:
                self._visitors.popitem(last=False)
        wait = bucket.take(now)
        return wait if wait > 0 else self.limit.take(now)

    @property
    def label(self) -> str:
        """How stored feedback names the key: its first characters only."""
        return f"widget:{self.key[:8]}"


class WidgetKeys:
    def __init__(self, keys: list[WidgetKey] | None = None):
        self.keys = list(keys or [])

    @classmethod
    def load(cls, keys_file: str | None) -> "WidgetKeys":
        if not keys_file:
            return cls()
        path = Path(keys_file)
        data = read_keys_file(path)
        table = data.get("widget_keys", {})
        if not isinstance(table, dict):
            raise UsageError(f"keys file {path}: [widget_keys] must be a table of keys")
        return cls([_parse(path, key, spec) for key, spec in table.items()])

    def find(self, key: str | None) -> WidgetKey | None:
        if not key:
            return None
        found = None
        for known in self.keys:  # constant-time comparison with every key
            if hmac.compare_digest(known.key.encode(), key.encode()):
                found = known
        return found

    def any_allows(self, origin: str | None) -> bool:
        return origin is not None and any(origin in k.origins for k in self.keys)

    def check_names(self, names: set[str]) -> None:
        for k in self.keys:
            unknown = sorted(k.indexes - names)
            if unknown:
                raise UsageError(f"widget key {k.label} is scoped to unknown index(es) {unknown}; served: {sorted(names)}")

    def check_plans(self, plans: set[str]) -> None:
        for k in self.keys:
            unknown = sorted(k.plans - plans)
            if unknown:
                raise UsageError(f"widget key {k.label} names unknown plan(s) {unknown}; plans: {sorted(plans)}")


def _parse(path: Path, key: str, spec) -> WidgetKey:
    where = f"keys file {path}: widget key {key[:8]!r}"
    if len(key) < 8 or any(c.isspace() for c in key):
        raise UsageError(f"{where}: a widget key must be at least 8 characters without spaces")
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: expected a table with indexes, origins, requests_per_minute")
    unknown = sorted(set(spec) - {"indexes", "origins", "requests_per_minute", "visitor_requests_per_minute", "plans"})
    if unknown:
        raise UsageError(
            f"{where}: unknown setting(s) {unknown}; "
            f"allowed: indexes, origins, requests_per_minute, visitor_requests_per_minute, plans"
        )
    plans = spec.get("plans", [])
    if not isinstance(plans, list) or not all(isinstance(p, str) and p for p in plans):
        raise UsageError(f"{where}: plans must be a list of plan names")
    indexes, origins = spec.get("indexes"), spec.get("origins")
    if not isinstance(indexes, list) or not indexes or not all(isinstance(i, str) and i and i != "*" for i in indexes):
        raise UsageError(f"{where}: indexes must name one or more indexes (no '*': a public key is never global)")
    if not isinstance(origins, list) or not origins or not all(isinstance(o, str) for o in origins):
        raise UsageError(f'{where}: origins must list the sites allowed to embed it, e.g. ["https://docs.example.com"]')
    normal = []
    for o in origins:
        n = normal_origin(o)
        if n is None:
            raise UsageError(f"{where}: {o!r} is not an origin (scheme://host[:port], no path, no '*')")
        normal.append(n)
    rate = spec.get("requests_per_minute", 30)
    if not isinstance(rate, int) or isinstance(rate, bool) or not 1 <= rate <= 100_000:
        raise UsageError(f"{where}: requests_per_minute must be an integer from 1 to 100000")
    visitor = spec.get("visitor_requests_per_minute", 10)
    if not isinstance(visitor, int) or isinstance(visitor, bool) or not 1 <= visitor <= 100_000:
        raise UsageError(f"{where}: visitor_requests_per_minute must be an integer from 1 to 100000")
    return WidgetKey(key, frozenset(indexes), frozenset(normal), rate, frozenset(plans), visitor)
