"""The HTTP service answering questions over indexes (`ragsieve serve`).

Here: the app (`app`, `factory`, `server`, `settings`), what every route shares (`errors`, `requests`, `jobs`),
the native routes and the question log's hook. Below: `chat` (the OpenAI-compatible chat completions), `auth`
(keys, scopes, widget keys, the caller's principals), `middleware` (connection, body and admission limits,
content type, access log, metrics), `indexes` (the served indexes, followed live), `feedback`, `documents`
(Files and Vector Stores), `mcp` (the MCP server) and `web` (the chat page, widget and source view).
"""
