"""relaxep: Expectation Propagation, Power EP and Relaxed EP for GP classification."""

from relaxep.classifier import DivergenceError, GPClassifier
from relaxep.inference import InferenceResult, infer
from relaxep.likelihoods import Likelihood, Logistic, NoisyStep, Probit
from relaxep.posterior import ImproperPosteriorError, KernelNotPositiveDefiniteError
from relaxep.rules import EP, DoubleLoopEP, FractionalEP, PowerEP, RelaxedEP, SiteRule

__all__ = [
    "EP",
    "DivergenceError",
    "DoubleLoopEP",
    "FractionalEP",
    "GPClassifier",
    "ImproperPosteriorError",
    "InferenceResult",
    "KernelNotPositiveDefiniteError",
    "Likelihood",
    "Logistic",
    "NoisyStep",
    "PowerEP",
    "Probit",
    "RelaxedEP",
    "SiteRule",
    "infer",
]

__version__ = "0.1.0"
