"""Data, indexes, calibration folds and the scripted oracle for `benchmarks/pipeline/main.py`:
`folds` (questions, index, calibrated copies), `judged` (the judge measured on them), `readers` (the
scripted oracle and the gullible reader).

Calibration never sees the questions it is evaluated on:
- SciFact: two folds of the test claims, each evaluated on an index copy calibrated on the other
  half (exchangeable, as CONFLARE assumes); `scifact_calibration="train"` calibrates on the train
  qrels (809 claims) instead, which measures what a shift between calibration and use costs.
- HotpotQA (103 questions, one qrels file): two folds; each half is evaluated on an index copy
  calibrated on the other half, one calibration record per gold paragraph (both hops matter).
- SQuAD 2.0: calibrated on answerable questions outside the evaluated sample.
"""
