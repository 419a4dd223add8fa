"""The OpenAI-compatible documents API (Files, Vector Stores) and native ingestion jobs of `ragsieve serve`."""
