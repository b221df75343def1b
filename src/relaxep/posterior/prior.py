r"""Priors: what a representation is built from.

A prior object (the protocol :class:`~relaxep.posterior.base.Prior`) stands for :math:`N(f | 0, K)`
at the training inputs in some representation and makes the posterior of that representation for
given sites.  :class:`~relaxep.posterior.dense.DensePrior` holds a dense ``K`` (as ``.K``);
:class:`~relaxep.posterior.sparse.SparsePrior` (FITC) holds :math:`K_{uu}`,
:math:`K_{uf}` (whitened) and :math:`\operatorname{diag} K_{ff}` instead, and nothing that consumes
priors changes.

Every representation is built the same way from a scikit-learn kernel, the training inputs and
the latent noise, ``(kernel, X, noise)``: :meth:`~relaxep.posterior.DensePrior.from_kernel` and
:meth:`~relaxep.posterior.SparsePrior.from_kernel` (which adds the inducing inputs ``Z``).  A prior
built so answers :meth:`~relaxep.posterior.Prior.cross_covariance` (:math:`K_{*f}` dense, :math:`K_{*u}` sparse) and
:meth:`~relaxep.posterior.Prior.predict_at`, so that a caller predicts without knowing the representation.

Each class lives beside its posterior (:mod:`relaxep.posterior.base`, :mod:`~relaxep.posterior.dense`,
:mod:`~relaxep.posterior.sparse`); this module keeps :func:`as_prior` and answers the old imports
``from relaxep.posterior.prior import DensePrior, Prior, kernel_matrix``.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from relaxep.posterior.base import Prior
from relaxep.posterior.dense import DensePrior, kernel_matrix

__all__ = ["DensePrior", "Prior", "as_prior", "kernel_matrix"]


def as_prior(prior: Prior | ArrayLike) -> Prior:
    """``prior`` itself, or a :class:`DensePrior` of a matrix."""
    if isinstance(prior, Prior):
        return prior
    if isinstance(prior, str | bytes) or prior is None:
        raise TypeError(f"K must be a covariance matrix or a relaxep Prior, got {prior!r}")
    return DensePrior(prior)
