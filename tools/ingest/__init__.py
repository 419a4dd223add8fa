"""Ingestion: finding files, reading formats into documents, chunking."""
