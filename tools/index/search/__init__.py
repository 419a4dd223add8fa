"""Search structures the engines and the query side share: BM25, the FAISS index, the symbol table, metadata
filters (`where`), admitted row sets and memory-mapped arrays. Imports no engine and no query code."""
