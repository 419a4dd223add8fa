"""Evaluation on BEIR-layout datasets: readers, question sampling, the evaluation run and its report."""
