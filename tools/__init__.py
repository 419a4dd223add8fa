"""ragsieve tools: chunking, stores, retrieval, fusion, rerank and statistical filters."""
