"""The state machine: the typed run state, the runner that follows a plan, and the shipped plans."""
