"""ragsieve's benchmarks, one sub-package per family; results in benchmarks/results, the report in REPORT.md."""
