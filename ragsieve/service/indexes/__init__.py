"""The indexes one server answers from, followed live as they publish generations."""
