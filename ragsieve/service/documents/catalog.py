"""What the documents API remembers on disk: uploaded files, vector stores and which file is in which store.

Layout under the server's `--data-dir`::

    files/<file-id>/meta.json, files/<file-id>/<filename>      an uploaded file, as sent
    stores/<store-id>/meta.json                                 a vector store (name, metadata, created)
    stores/<store-id>/files/<file-id>.json                      its copy of a file: status, attributes, error
    stores/<store-id>/batches/<batch-id>.json                   a file batch: its files, whether cancelled
    stores/<store-id>/docs/<file-id>/<filename>                 what the builder reads (a hard link)
    stores/<store-id>/index/                                    the ragsieve index (generations)

A vector store is a ragsieve index: one created over HTTP lives in `index/`;
an index served with `--index NAME=DIR` is the vector store `NAME` (its files'
records live here, its index stays in DIR). A document's id and citation
source is `<file-id>/<filename>`, so a file's chunks are the rows whose
source starts with `<file-id>/`. Every record is written atomically, and a
record's read-modify-write (`update_entry`) holds `.lock`, so the worker
processes of `serve --workers N` never lose each other's changes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]+")  # controls, bidi marks
MAX_NAME_BYTES = 200  # under every file system's 255-byte limit, in UTF-8
SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")  # an id as a file name: no folders, no dot files


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def safe_filename(name: str) -> str:
    """The uploaded name kept as sent, made safe to store: its last path component (`/` and `\\` separate), control
    and bidi characters as `_`, no leading dots (no hidden files, no `..`), at most MAX_NAME_BYTES of UTF-8 (the
    extension kept). `__init__.py` and non-ASCII names stay as they are, so citations name the file uploaded."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = UNSAFE_CHARS.sub("_", base).strip().lstrip(".") or "file"
    if len(base.encode("utf-8")) <= MAX_NAME_BYTES:
        return base
    stem, dot, ext = base.rpartition(".")
    ext = (dot + ext) if dot and stem and len(ext.encode("utf-8")) <= 20 else ""
    stem = base[: len(base) - len(ext)] if ext else base
    room = MAX_NAME_BYTES - len(ext.encode("utf-8"))
    return stem.encode("utf-8")[:room].decode("utf-8", "ignore") + ext


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


class Catalog:
    """Files and vector stores under `root`; `served` maps the `--index` names to their folders."""

    def __init__(self, root: str | Path, served: dict[str, Path]) -> None:
        self.root = Path(root)
        self.served = {k: Path(v) for k, v in served.items()}
        self.lock = threading.RLock()
        (self.root / "files").mkdir(parents=True, exist_ok=True)
        (self.root / "stores").mkdir(parents=True, exist_ok=True)

    @contextmanager
    def locked(self):
        """One writer of records at a time, across threads and worker processes."""
        with self.lock, open(self.root / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # -- files ---------------------------------------------------------------
    def add_file(self, filename: str, data: bytes, purpose: str) -> dict:
        file_id = new_id("file-")
        name = safe_filename(filename)
        folder = self.root / "files" / file_id
        folder.mkdir(parents=True)
        (folder / name).write_bytes(data)
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
        }
        write_json(folder / "meta.json", meta)
        return meta

    def file(self, file_id: str) -> dict | None:
        if not file_id.startswith("file-") or not SAFE_ID.fullmatch(file_id):
            return None
        return read_json(self.root / "files" / file_id / "meta.json")

    def file_path(self, meta: dict) -> Path:
        return self.root / "files" / meta["id"] / meta["filename"]

    def files(self) -> list[dict]:
        out = [read_json(p / "meta.json") for p in (self.root / "files").iterdir() if p.is_dir()]
        return sorted((m for m in out if m), key=lambda m: (m["created_at"], m["id"]))

    def delete_file(self, file_id: str) -> None:
        shutil.rmtree(self.root / "files" / file_id, ignore_errors=True)

    # -- vector stores ---------------------------------------------------------
    def store_dir(self, store_id: str) -> Path:
        return self.root / "stores" / store_id

    def index_dir(self, store_id: str) -> Path:
        return self.served.get(store_id) or self.store_dir(store_id) / "index"

    def add_store(self, name: str, metadata: dict, expires_after: dict | None = None) -> dict:
        store_id = new_id("vs_")
        meta = {
            "id": store_id,
            "name": name,
            "metadata": metadata,
            "created_at": int(time.time()),
            "expires_after": expires_after,
        }
        write_json(self.store_dir(store_id) / "meta.json", meta)
        return meta

    def store(self, store_id: str) -> dict | None:
        if store_id in self.served:
            return read_json(self.store_dir(store_id) / "meta.json") or {
                "id": store_id,
                "name": store_id,
                "metadata": {"served": "true"},
                "created_at": None,
            }
        if not store_id.startswith("vs_") or not SAFE_ID.fullmatch(store_id):
            return None
        return read_json(self.store_dir(store_id) / "meta.json")

    def stores(self) -> list[dict]:
        ids = set(self.served) | {p.name for p in (self.root / "stores").iterdir() if p.name.startswith("vs_")}
        out = [self.store(i) for i in ids]
        return sorted((m for m in out if m), key=lambda m: (m["created_at"] or 0, m["id"]))

    def delete_store(self, store_id: str) -> None:
        shutil.rmtree(self.store_dir(store_id), ignore_errors=True)

    # -- files in stores ---------------------------------------------------------
    def entry_path(self, store_id: str, file_id: str) -> Path:
        return self.store_dir(store_id) / "files" / f"{file_id}.json"

    def put_entry(self, store_id: str, entry: dict) -> None:
        write_json(self.entry_path(store_id, entry["id"]), entry)

    def entry(self, store_id: str, file_id: str) -> dict | None:
        if not SAFE_ID.fullmatch(file_id):
            return None
        return read_json(self.entry_path(store_id, file_id))

    def update_entry(self, store_id: str, file_id: str, change) -> dict | None:
        """`change(entry)` -> the new record (written) or None (left as is); None when there is no entry."""
        with self.locked():
            entry = self.entry(store_id, file_id)
            if entry is None:
                return None
            new = change(dict(entry))
            if new is None:
                return entry
            self.put_entry(store_id, new)
            return new

    def entries(self, store_id: str) -> list[dict]:
        folder = self.store_dir(store_id) / "files"
        if not folder.is_dir():
            return []
        out = [read_json(p) for p in folder.glob("*.json")]
        return sorted((e for e in out if e), key=lambda e: (e["created_at"], e["id"]))

    def drop_entry(self, store_id: str, file_id: str) -> None:
        self.entry_path(store_id, file_id).unlink(missing_ok=True)
        shutil.rmtree(self.docs_dir(store_id) / file_id, ignore_errors=True)

    def docs_dir(self, store_id: str) -> Path:
        return self.store_dir(store_id) / "docs"

    def stage(self, store_id: str, meta: dict) -> Path:
        """The file placed where the builder reads it: `docs/<file-id>/<filename>` (a hard link when possible)."""
        folder = self.docs_dir(store_id) / meta["id"]
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / meta["filename"]
        if not target.exists():
            try:
                os.link(self.file_path(meta), target)
            except OSError:
                shutil.copyfile(self.file_path(meta), target)
        return folder

    # -- file batches ---------------------------------------------------------------------
    def add_batch(self, store_id: str, file_ids: list[str]) -> dict:
        batch = {
            "id": new_id("vsfb_"),
            "created_at": int(time.time()),
            "vector_store_id": store_id,
            "file_ids": file_ids,
            "cancelled": False,
        }
        write_json(self.store_dir(store_id) / "batches" / f"{batch['id']}.json", batch)
        return batch

    def batch(self, store_id: str, batch_id: str) -> dict | None:
        if not batch_id.startswith("vsfb_") or not SAFE_ID.fullmatch(batch_id):
            return None
        return read_json(self.store_dir(store_id) / "batches" / f"{batch_id}.json")

    def put_batch(self, store_id: str, batch: dict) -> None:
        write_json(self.store_dir(store_id) / "batches" / f"{batch['id']}.json", batch)

    def stores_holding(self, file_id: str) -> list[str]:
        return [s["id"] for s in self.stores() if self.entry_path(s["id"], file_id).is_file()]
