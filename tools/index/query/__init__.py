"""Searching an index: BM25 and FAISS, fusion, the hybrid retriever, metadata filters, symbols."""
