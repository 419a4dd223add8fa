"""The OpenAI-compatible chat completions: routes, replies that skip retrieval, rendering."""
