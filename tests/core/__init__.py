"""The library in process: ingestion, indexes and backends, the pipeline and its steps, the CLI."""
