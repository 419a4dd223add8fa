"""Answers given and the feedback on them, and the rated answers as an eval dataset."""
