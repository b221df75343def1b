"""Likelihoods: each answers ``log Z`` and its derivatives for a target and a Gaussian cavity (GPML's design)."""

from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.binary import Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.likelihoods.folded import BinaryLikelihood
from relaxep.likelihoods.quadrature import QuadratureLikelihood

__all__ = [
    "BinaryLikelihood",
    "Likelihood",
    "Logistic",
    "NoisyProbit",
    "NoisyStep",
    "Probit",
    "QuadratureLikelihood",
    "TiltedLogZ",
]
