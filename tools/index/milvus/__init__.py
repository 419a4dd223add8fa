"""The `milvus` backend: publishing a local generation into a collection, and reading it."""
