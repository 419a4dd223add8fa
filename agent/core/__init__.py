"""What every step is built from: the typed run state, the step base and its result, the dependencies'
protocols, caches, and the helpers steps share (evidence, the conformal signal, rerankers, citation locations)."""
