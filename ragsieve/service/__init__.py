"""The HTTP service answering questions over an index."""
