"""Readers for evaluation datasets on disk (BEIR layout)."""
