"""Searching an index: fusion, the hybrid retriever, definitions first, one passage per source."""
