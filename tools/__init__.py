"""What the agent calls: ingestion, the index, statistical filters, metrics."""
