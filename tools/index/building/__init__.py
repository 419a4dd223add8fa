"""Building an index: change plans, embedding (checkpointed, streamed, on Ray), generation writers."""
