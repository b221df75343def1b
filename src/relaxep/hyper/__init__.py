"""Hyperparameters as random variables: integration over them by a CCD or a grid (:mod:`relaxep.hyper.design`),
at the mode's Hessian (:mod:`relaxep.hyper.hessian`)."""

from relaxep.hyper.design import (
    ThetaDesign,
    ccd_design,
    fractional_factorial,
    grid_design,
    theta_design,
    weighted_moments,
)
from relaxep.hyper.hessian import hessian_from_gradient

__all__ = [
    "ThetaDesign",
    "ccd_design",
    "fractional_factorial",
    "grid_design",
    "hessian_from_gradient",
    "theta_design",
    "weighted_moments",
]
