"""What every route shares: error responses, request parsing, background jobs and the question log's hook."""
