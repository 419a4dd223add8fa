"""The chunk store's SQLite schemas (`ragsieve.tools.index.local.store`).

`SCHEMA`: one generation's own store, row unique. `SHARED_SCHEMA`: the store
incremental generations share, where each row version records the generation
it was born in and the one that retired it (0: alive).
"""

from __future__ import annotations

_CHUNK_COLUMNS = """
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    kind TEXT NOT NULL,
    line_start INTEGER,
    line_end INTEGER,
    symbol TEXT NOT NULL DEFAULT '',
"""  # a chunk's own columns, after its key and row, in both schemas

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS chunks (
    doc_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    row INTEGER NOT NULL UNIQUE,
"""
    + _CHUNK_COLUMNS
    + """    PRIMARY KEY (doc_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    first_row INTEGER NOT NULL
);
"""
)
SHARED_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS chunks (
    doc_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    row INTEGER NOT NULL,
"""
    + _CHUNK_COLUMNS
    + """    born INTEGER NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_row ON chunks(row, born);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, chunk_index);
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
CREATE INDEX IF NOT EXISTS chunks_born ON chunks(born);
CREATE INDEX IF NOT EXISTS chunks_retired ON chunks(retired);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    first_row INTEGER NOT NULL,
    born INTEGER NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS documents_doc ON documents(doc_id);
CREATE INDEX IF NOT EXISTS documents_born ON documents(born);
CREATE INDEX IF NOT EXISTS documents_retired ON documents(retired);
"""
)
COLS = "doc_id, chunk_index, text, source, title, kind, line_start, line_end, symbol"
OLD_COLS = "doc_id, chunk_index, text, source, title, kind, line_start, line_end, '' AS symbol"  # before `symbol`
