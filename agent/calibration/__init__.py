"""Conformal calibration (CONFLARE): measuring where answers sit in the similarity ranking, and the saved result."""

from ragsieve.agent.calibration.calibrator import Calibrator
from ragsieve.agent.calibration.questions import ContainsVerdict, GeneratedQA, read_qrels
from ragsieve.agent.calibration.store import (
    CALIBRATION_FILE,
    Calibration,
    CalibrationRecord,
    calibration_path,
    format_report,
    load_calibration,
    save_calibration,
)

__all__ = [
    "CALIBRATION_FILE",
    "Calibration",
    "CalibrationRecord",
    "Calibrator",
    "ContainsVerdict",
    "GeneratedQA",
    "calibration_path",
    "format_report",
    "load_calibration",
    "read_qrels",
    "save_calibration",
]
