r"""Model assessment: leave-one-out cross-validation from EP's cavities, model comparison, outliers.

An estimator's ``loo()`` returns a :class:`LooResult` (``pointwise`` :math:`\log p(y_i | y_{-i})`,
``elpd_loo``, ``se``, ``p_loo``, :meth:`LooResult.outliers`, :meth:`LooResult.to_arviz`) and its ``loo_predict()``
a :class:`LooPrediction`; :func:`compare` ranks models by ``elpd_loo`` with the standard error of each
difference.  The maths is :mod:`relaxep.inference.loo`'s; this package holds the results and the comparison,
and reads estimators only through their ``loo()``.
"""

from relaxep.assessment.compare import Comparison, compare
from relaxep.assessment.result import LooPrediction, LooResult, fingerprint

__all__ = ["Comparison", "LooPrediction", "LooResult", "compare", "fingerprint"]
