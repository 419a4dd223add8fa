"""The local engine: generations on disk (SQLite chunk store, segments, reader leases, the writer's lock),
opened as one `HybridIndex`."""
