"""Opening an index folder with the engine it was published to (`open`): the one room that knows both engines."""
