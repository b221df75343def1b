r"""Model assessment: leave-one-out cross-validation from EP's cavities, model comparison, outliers.

An estimator's ``loo()`` returns a :class:`LooResult` (``pointwise`` :math:`\log p(y_i | y_{-i})`,
``elpd_loo``, ``se``, ``p_loo``, :meth:`LooResult.outliers`, :meth:`LooResult.to_arviz`) and its ``loo_predict()``
a :class:`LooPrediction`; :func:`compare` ranks models by ``elpd_loo`` with the standard error of each
difference.  The maths is :mod:`relaxep.inference.loo`'s; this package holds the results and the comparison,
and reads estimators only through their ``loo()``.  :mod:`~relaxep.assessment.survival_metrics` scores survival
predictions: Harrell's concordance index, Kaplan–Meier, the IPCW Brier score and its integral.
"""

from relaxep.assessment.compare import Comparison, compare
from relaxep.assessment.result import LooPrediction, LooResult, fingerprint
from relaxep.assessment.survival_metrics import (
    ConcordanceCounts,
    brier_score,
    concordance_counts,
    concordance_index,
    evaluate_step,
    integrated_brier_score,
    kaplan_meier,
)

__all__ = [
    "Comparison",
    "ConcordanceCounts",
    "LooPrediction",
    "LooResult",
    "brier_score",
    "compare",
    "concordance_counts",
    "concordance_index",
    "evaluate_step",
    "fingerprint",
    "integrated_brier_score",
    "kaplan_meier",
]
