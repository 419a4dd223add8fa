"""What wraps the routes: connection, body and admission limits, content type, access log, metrics."""
