"""The hyperparameters' own inference: their priors (:mod:`.priors`, :mod:`.log_prior`)."""

from relaxep.hyper.log_prior import DataScales, LogPrior, resolve_prior
from relaxep.hyper.priors import Gamma, HalfStudentT, HyperPrior, InverseGamma, LogNormal, LogUniform, Uniform

__all__ = [
    "DataScales",
    "Gamma",
    "HalfStudentT",
    "HyperPrior",
    "InverseGamma",
    "LogNormal",
    "LogPrior",
    "LogUniform",
    "Uniform",
    "resolve_prior",
]
