r"""relaxep's EP models as BoTorch models: failure-aware and preferential Bayesian optimisation.

EP runs in numpy as everywhere in relaxep; only the prediction at new points is torch, differentiable in the
points, so BoTorch's acquisition functions and ``optimize_acqf`` run on the fitted models unchanged:

* :class:`EPClassifierModel`: a binary :class:`~relaxep.GPClassifier` whose output :math:`g` has
  :math:`P(g > 0)` equal to the classifier's ``predict_proba(X)[:, 1]``, for every binary likelihood: the
  feasibility model of constrained BO (``LogConstrainedExpectedImprovement``, ``LogProbabilityOfFeasibility``,
  ``qLogExpectedImprovement(..., constraints=...)``);
* :class:`EPPreferenceModel`: a :class:`~relaxep.GPPreferenceLearner`'s utility behind ``PairwiseGP``'s
  interface (``datapoints``, ``comparisons``, ``posterior``), for EUBO and qEUBO;
* :class:`InformationGain` and :class:`Straddle`: the classifier's active-learning criteria (BALD, the straddle)
  as acquisition functions on an :class:`EPClassifierModel`.

Needs the optional extra: ``pip install "relaxep[botorch]"`` (torch and BoTorch); ``import relaxep`` never
imports torch.
"""

try:
    import botorch  # noqa: F401
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed where this runs
    raise ImportError('relaxep.botorch needs torch and BoTorch: pip install "relaxep[botorch]"') from exc

from relaxep.botorch.acquisition import InformationGain, Straddle
from relaxep.botorch.classifier_model import EPClassifierModel
from relaxep.botorch.kernels import check_kernel, kernel_matrix
from relaxep.botorch.latent import LatentPosterior
from relaxep.botorch.preference_model import EPPreferenceModel

__all__ = [
    "EPClassifierModel",
    "EPPreferenceModel",
    "InformationGain",
    "LatentPosterior",
    "Straddle",
    "check_kernel",
    "kernel_matrix",
]
