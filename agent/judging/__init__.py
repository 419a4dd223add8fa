"""Relevance judging: batched judge rounds, the checks that decide whether to trust them, and the combination rule."""
