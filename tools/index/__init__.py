"""The index, in rooms: `backend` (the contract) and `open` (either engine); `local/` and `milvus/` (the two
engines); `query/` (BM25, FAISS, fusion, the retriever, filters); `building/` (writing generations);
`embedders/` (the embedding providers and their devices); `sparse/` (the COS-Mix sparse subset)."""
