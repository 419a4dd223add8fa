"""Who is calling: API keys and their scopes, widget keys, the caller's principals."""
