"""Inference methods (site updates, double-loop EP, the automatic cascade), ``infer`` and its result;
``infer_multiclass``, joint multi-class EP."""

from relaxep.inference.auto import Auto
from relaxep.inference.convergent import ConvergentEP
from relaxep.inference.double_loop import DoubleLoopEP
from relaxep.inference.driver import as_method, infer
from relaxep.inference.evidence import evidence_gradient, log_evidence
from relaxep.inference.ledger import ConvergenceMonitor, RunOptions, SweepLedger
from relaxep.inference.method import InferenceMethod
from relaxep.inference.multiclass import MulticlassResult, infer_multiclass
from relaxep.inference.result import Attempt, InferenceResult
from relaxep.inference.site_updates import SiteUpdates, SweepOptions

__all__ = [
    "Attempt",
    "Auto",
    "ConvergenceMonitor",
    "ConvergentEP",
    "DoubleLoopEP",
    "InferenceMethod",
    "InferenceResult",
    "MulticlassResult",
    "RunOptions",
    "SiteUpdates",
    "SweepLedger",
    "SweepOptions",
    "as_method",
    "evidence_gradient",
    "infer",
    "infer_multiclass",
    "log_evidence",
]
