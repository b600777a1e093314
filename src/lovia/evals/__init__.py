"""Evaluation: pin recorded runs as cases, prove the baseline, score candidates."""

from __future__ import annotations

from ._case import FORMAT_VERSION, Case, CaseError, load_case, load_cases
from ._pin import pin, pin_run

__all__ = ["FORMAT_VERSION", "Case", "CaseError", "load_case", "load_cases", "pin", "pin_run"]
