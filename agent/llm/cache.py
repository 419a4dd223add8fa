"""`DiskCache`: a `ReplyCache` keeping one JSON file per key on disk.

Layout: `<folder>/<key[0:2]>/<key[2:4]>/<key>.json`. Writes go to a temp file
in the same folder then `os.replace`, so readers never see half a file; a
file that does not parse or validate is a miss (logged at warning).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from pathlib import Path

from pydantic import ValidationError

from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.chat import ChatReply

log = logging.getLogger(__name__)

_HEX_KEY = re.compile(r"^[0-9a-f]{8,128}$")


class DiskCache:
    """Thread-safe on-disk reply cache (keys are hex digests, as `ragsieve.agent.llm.client.cache_key` makes)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        if not str(folder):
            raise UsageError("DiskCache folder must not be empty")
        self.folder = Path(folder).expanduser()
        if self.folder.exists() and not self.folder.is_dir():
            raise UsageError(f"DiskCache folder {self.folder} exists and is not a directory")
        self._lock = threading.Lock()

    def path_for(self, key: str) -> Path:
        if not isinstance(key, str) or not _HEX_KEY.match(key):
            raise UsageError(f"invalid cache key {key!r}: expected 8-128 lowercase hex digits")
        return self.folder / key[:2] / key[2:4] / f"{key}.json"

    def get(self, key: str) -> ChatReply | None:
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("reply cache: cannot read %s (%s); treating as a miss", path, exc)
            return None
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or data.get("key") != key:
                raise ValueError("entry does not belong to this key")
            return ChatReply.model_validate(data["reply"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            log.warning("reply cache: corrupted entry %s (%s); treating as a miss", path, exc)
            return None

    def put(self, key: str, reply: ChatReply) -> None:
        path = self.path_for(key)
        stored = reply.model_copy(update={"cached": False})
        blob = json.dumps({"key": key, "reply": stored.model_dump()}, ensure_ascii=False)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(blob)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                raise
