"""Multi-class GP classification by joint EP.

* :mod:`~relaxep.multiclass.likelihoods`: the multinomial probit and the robust max
  (multi-class label noise), with tilted moments by an inner EP;
* :mod:`~relaxep.multiclass.inference`: nested EP (Riihimaki, Jylanki & Vehtari 2013) for the
  multinomial probit, dense EP on the label differences for the robust max, the EP evidence
  and its gradient.

:class:`relaxep.GPClassifier` uses them for more than two classes (``multi_class="joint"``).
"""

from relaxep.multiclass.inference import MulticlassResult, evidence_gradient, infer_multiclass
from relaxep.multiclass.likelihoods import MulticlassLikelihood, MultinomialProbit, RobustMax

__all__ = [
    "MulticlassLikelihood",
    "MulticlassResult",
    "MultinomialProbit",
    "RobustMax",
    "evidence_gradient",
    "infer_multiclass",
]
