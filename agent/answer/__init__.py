"""From retrieved passages to a cited answer: the prompt, citations, grounding, conversations."""
