"""The state machine: the runner that follows a plan, and the shipped plans (`plans`)."""
