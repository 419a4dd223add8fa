"""The sdist and wheel, built and installed into fresh venvs outside the repository."""
