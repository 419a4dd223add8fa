"""LLM access: the chat protocol, the OpenAI client, the embedded llama.cpp server, the cache, templates and a fake."""
