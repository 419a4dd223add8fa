"""The MCP server: ragsieve's indexes as tools (search, ask, read, indexes) for agents."""
