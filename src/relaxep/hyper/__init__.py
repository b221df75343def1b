"""Hyperparameters as random variables: their priors (:mod:`relaxep.hyper.priors`, resolved over a search's vector
by :mod:`relaxep.hyper.log_prior`) and integration over them by a CCD or a grid (:mod:`relaxep.hyper.design`) at the
mode's Hessian (:mod:`relaxep.hyper.hessian`)."""

from relaxep.hyper.design import (
    ThetaDesign,
    ccd_design,
    fractional_factorial,
    grid_design,
    theta_design,
    weighted_moments,
)
from relaxep.hyper.hessian import hessian_from_gradient
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
    "ThetaDesign",
    "Uniform",
    "ccd_design",
    "fractional_factorial",
    "grid_design",
    "hessian_from_gradient",
    "resolve_prior",
    "theta_design",
    "weighted_moments",
]
