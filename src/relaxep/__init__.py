"""relaxep: Expectation Propagation, Power EP and Relaxed EP for Gaussian processes.

The data flow, one layer per subpackage: likelihoods (:mod:`relaxep.likelihoods`) -> site
rules (:mod:`relaxep.sites`) -> posterior representations (:mod:`relaxep.posterior`) ->
schedules (:mod:`relaxep.inference.schedules`) and inference methods (:mod:`relaxep.inference`) ->
the estimators (:mod:`relaxep.estimators`) -> studies (:mod:`relaxep.experiments`) -> the command line.
"""

from importlib.metadata import PackageNotFoundError, version

from relaxep.errors import (
    ClusterError,
    DivergenceError,
    ImproperPosteriorError,
    KernelNotPositiveDefiniteError,
    MemoryLimitError,
)
from relaxep.estimators.classifier import GPClassifier
from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor
from relaxep.estimators.ordinal import GPOrdinalClassifier
from relaxep.estimators.regressor import GPRegressor
from relaxep.inference import (
    Attempt,
    Auto,
    ConvergentEP,
    DoubleLoopEP,
    InferenceMethod,
    InferenceResult,
    SiteUpdates,
    infer,
)
from relaxep.inference.schedules import Blocked, Parallel, Sequential
from relaxep.likelihoods import (
    Gaussian,
    Laplace,
    Likelihood,
    Logistic,
    MulticlassLikelihood,
    MultinomialProbit,
    NegativeBinomial,
    NoisyProbit,
    NoisyStep,
    OrdinalProbit,
    Poisson,
    Probit,
    RobustMax,
    StudentT,
)
from relaxep.posterior import DensePrior, Prior, SparsePrior
from relaxep.sites import EP, FractionalEP, PowerEP, RelaxedEP, SiteRule

__all__ = [
    "EP",
    "Attempt",
    "Auto",
    "Blocked",
    "ClusterError",
    "ConvergentEP",
    "DaskGPClassifier",
    "DaskGPRegressor",
    "DensePrior",
    "DivergenceError",
    "DoubleLoopEP",
    "FractionalEP",
    "GPClassifier",
    "GPOrdinalClassifier",
    "GPRegressor",
    "Gaussian",
    "ImproperPosteriorError",
    "InferenceMethod",
    "InferenceResult",
    "KernelNotPositiveDefiniteError",
    "Laplace",
    "Likelihood",
    "Logistic",
    "MemoryLimitError",
    "MulticlassLikelihood",
    "MultinomialProbit",
    "NegativeBinomial",
    "NoisyProbit",
    "NoisyStep",
    "OrdinalProbit",
    "Parallel",
    "Poisson",
    "PowerEP",
    "Prior",
    "Probit",
    "RelaxedEP",
    "RobustMax",
    "Sequential",
    "SiteRule",
    "SiteUpdates",
    "SparsePrior",
    "StudentT",
    "infer",
]

try:
    __version__ = version("relaxep")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "0+unknown"
