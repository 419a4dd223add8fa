"""The index: chunk store, BM25, dense vectors, fusion, the hybrid retriever and the builder."""
