"""relaxep: Expectation Propagation, Power EP and Relaxed EP for Gaussian processes.

The data flow, one layer per subpackage: likelihoods (:mod:`relaxep.likelihoods`) -> site
rules (:mod:`relaxep.sites`) -> posterior representations (:mod:`relaxep.posterior`) ->
schedules (:mod:`relaxep.inference.schedules`) and inference methods (:mod:`relaxep.inference`) ->
the estimators (:mod:`relaxep.estimators`) -> studies (:mod:`relaxep.experiments`) -> the command line.
"""

from importlib.metadata import PackageNotFoundError, version

from relaxep import likelihoods
from relaxep.assessment import LooResult, compare
from relaxep.errors import (
    ClusterError,
    DivergenceError,
    ImproperPosteriorError,
    KernelNotPositiveDefiniteError,
    MemoryLimitError,
)
from relaxep.estimators import Derivatives
from relaxep.estimators.classifier import GPClassifier
from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor, DaskGPSurvivalRegressor
from relaxep.estimators.heteroscedastic import GPHeteroscedasticRegressor
from relaxep.estimators.ordinal import GPOrdinalClassifier
from relaxep.estimators.preference import GPPreferenceLearner
from relaxep.estimators.regressor import GPRegressor
from relaxep.estimators.survival import GPSurvivalRegressor
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
from relaxep.likelihoods import *  # noqa: F403 (every likelihood, re-exported: __all__ below)
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
    "DaskGPSurvivalRegressor",
    "DensePrior",
    "Derivatives",
    "DivergenceError",
    "DoubleLoopEP",
    "FractionalEP",
    "GPClassifier",
    "GPHeteroscedasticRegressor",
    "GPOrdinalClassifier",
    "GPPreferenceLearner",
    "GPRegressor",
    "GPSurvivalRegressor",
    "ImproperPosteriorError",
    "InferenceMethod",
    "InferenceResult",
    "KernelNotPositiveDefiniteError",
    "LooResult",
    "MemoryLimitError",
    "Parallel",
    "PowerEP",
    "Prior",
    "RelaxedEP",
    "Sequential",
    "SiteRule",
    "SiteUpdates",
    "SparsePrior",
    "compare",
    "infer",
]
__all__ += likelihoods.__all__

try:
    __version__ = version("relaxep")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "0+unknown"
