"""The service on a loopback port: OpenAI API, /v1/ask, documents API, MCP, insights, access."""
