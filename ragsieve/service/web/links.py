"""Where a citation opens: a web page at its anchor, else the source view of the indexed text (lines or page).

Source-view links carry a signature over (index, chunk id, expiry) made with
the server's secret: the view opens without an API key (a new tab or the
widget on another site cannot send one), but only for chunks this server
cited, and only until the link expires (LINK_TTL_S after the answer: a link
that was copied or leaked does not open the document for ever).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from ragsieve.agent.core.locations import page_of

SECRET_FILE = "ui-secret"
LINK_TTL_S = 24 * 3600  # how long a source-view link opens after the answer that made it


def load_secret(folder: str | Path | None) -> bytes:
    """The link-signing secret kept in `folder` (created once, mode 0600) so links survive a restart and are
    shared by `--workers`; a fresh one per process without a folder."""
    if folder is None:
        return secrets.token_bytes(32)
    path = Path(folder) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():  # written whole under a temporary name, then linked: `--workers` never read half a file
        tmp = path.with_name(f".{SECRET_FILE}-{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another worker made it first: use theirs
        finally:
            tmp.unlink()
    data = path.read_bytes()
    if len(data) < 32:
        raise OSError(f"{path} is damaged (shorter than 32 bytes): delete it to make a new one")
    return data


def sign(secret: bytes, index: str, chunk_id: str) -> str:
    return hmac.new(secret, f"{index}\0{chunk_id}".encode(), hashlib.sha256).hexdigest()[:32]


def verify(secret: bytes, index: str, chunk_id: str, token: str) -> bool:
    return hmac.compare_digest(sign(secret, index, chunk_id), token or "")


def signed_part(chunk_id: str, reading_as: str | None, expires: int) -> str:
    """What a source link's signature covers besides the index: the chunk, the principals, the expiry."""
    return (chunk_id if reading_as is None else f"{chunk_id}\0as={reading_as}") + f"\0e={expires}"


def web_url(source: str) -> str | None:
    """`source` when it is an http(s) URL (a crawled page), else None."""
    parts = urlsplit(source)
    return source if parts.scheme in ("http", "https") and parts.netloc else None


def citation_href(secret: bytes, index: str, citation, readers: tuple[str, ...] | None = None) -> tuple[str, str]:
    """(href, kind): kind is `web`, `lines`, `page` or `chunk`; a source-view href is relative to the server.
    For a caller reading as `readers` the link carries them (`as`, signed with the chunk): the source view
    checks them against the document's access list when the link is opened."""
    url = web_url(citation.source)
    if url is not None:
        anchor = citation.symbol if citation.symbol.startswith("#") else ""
        return url.split("#", 1)[0] + anchor, "web"
    expires = int(time.time()) + LINK_TTL_S
    signed = signed_part(citation.chunk_id, None if readers is None else ",".join(readers), expires)
    params = {"index": index, "chunk": citation.chunk_id, "e": str(expires), "t": sign(secret, index, signed)}
    query = urlencode(params if readers is None else {**params, "as": ",".join(readers)})
    href = f"/ui/source?{query}"
    if citation.line_start is not None:
        return f"{href}#L{citation.line_start}", "lines"
    page = page_of(citation.symbol)
    if page is not None:
        return f"{href}#page-{page}", "page"
    return f"{href}#cited", "chunk"


def public_citations(secret: bytes, index: str, citations, readers: tuple[str, ...] | None = None) -> list[dict]:
    out = []
    for c in citations:
        href, kind = citation_href(secret, index, c, readers)
        out.append(
            {
                "number": c.number,
                "label": c.label(),
                "title": c.title,
                "source": c.source,
                "chunk_id": c.chunk_id,
                "line_start": c.line_start,
                "line_end": c.line_end,
                "symbol": c.symbol,
                "href": href,
                "kind": kind,
                "cited": c.cited,
                "origin": c.origin,
                "heading": c.heading,
                "location": c.location(),
            }
        )
    return out
