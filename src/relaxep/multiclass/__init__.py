"""Multi-class GP classification by joint EP: a face over the likelihoods and the inference (no code here).

* :mod:`relaxep.likelihoods.multiclass`: the multinomial probit and the robust max
  (multi-class label noise), with tilted moments by an inner EP (re-exported here);
* :mod:`relaxep.inference.multiclass`: :func:`infer_multiclass`, which runs nested EP
  (Riihimaki, Jylanki & Vehtari 2013) for the multinomial probit or dense EP on the label
  differences for the robust max, and the EP evidence's gradient (re-exported here), and
  :func:`infer_multiclass_sparse`, nested EP under a low-rank (inducing-input) prior.

The two posteriors live in :mod:`relaxep.posterior.multiclass` (``NestedPosterior``,
``RobustMaxPosterior``), the damped parallel loop that runs both and :class:`MulticlassResult`
in :mod:`relaxep.inference.damped_parallel`.

:class:`relaxep.GPClassifier` uses them for more than two classes (``multi_class="joint"``); its default
one-vs-rest model's class probabilities are :func:`independent_log_proba` of the binary latents.
"""

from relaxep.inference.multiclass import (
    MulticlassResult,
    evidence_gradient,
    infer_multiclass,
    infer_multiclass_sparse,
)
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit, RobustMax, independent_log_proba

__all__ = [
    "MulticlassLikelihood",
    "MulticlassResult",
    "MultinomialProbit",
    "RobustMax",
    "evidence_gradient",
    "independent_log_proba",
    "infer_multiclass",
    "infer_multiclass_sparse",
]
