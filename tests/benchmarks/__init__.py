"""The benchmarks' own code: reports, docs figures, scripted judges."""
