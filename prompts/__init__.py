"""Prompt templates (*.j2) shipped inside the wheel; rendered by ragsieve.agent.llm.templates."""
