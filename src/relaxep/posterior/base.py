r"""The protocols every representation implements: the posterior (GPML's init / update / marginals
triple) and the prior that makes it.

Naming, stated once for the package: the prior is :math:`N(f | 0, K)`; site :math:`i` has
natural parameters :math:`\tau_i` (``site_precision``) and :math:`\nu_i`
(``site_mean_precision``, the precision-adjusted mean, GPML's ``tnu``), :math:`T =
\operatorname{diag}(\tau)`; the Gaussian posterior :math:`q(f) = N(\mu, A)` has mean ``mean``
(:math:`\mu`) and marginal variances ``marginal_var`` (:math:`A_{ii}`); the cavity of site
:math:`i` is :math:`N(h_i, \lambda_i)`, the marginal with the site (or a fraction of it)
divided out.

A representation (dense, :mod:`relaxep.posterior.dense`, or sparse, :mod:`relaxep.posterior.sparse`)
holds this state and offers what an inference method needs: the marginals and cavities, a one-site
update, bulk site changes followed by a refresh, a sequential sweep it may run its own way,
:math:`\log Z_q` for the evidence, and predictions from the prior's cross-covariances.  Its
:class:`Prior` stands for :math:`N(f | 0, K)` at the training inputs and makes the posterior for
given sites.  The schedules and inference methods speak only these two protocols.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from relaxep._typing import Array
from relaxep._xp import HOST, ArraySpace, to_numpy

__all__ = [
    "MatrixPrior",
    "Posterior",
    "Prior",
    "RefreshedPosterior",
    "SiteProposer",
    "SweepStats",
    "cavity",
    "is_proper",
]

T = TypeVar("T")

#: ``propose(i, cavity_mean, cavity_var, tau_i, nu_i, marginal_var_i) -> (tau, nu)``: a new site for site ``i``
SiteProposer = Callable[[int, float, float, float, float, float], tuple[float, float]]


@dataclass(frozen=True)
class SweepStats:
    """What happened in one sweep.

    ``skipped`` lists (sorted) every site left unchanged: improper cavities (also counted in
    ``n_improper_cavities``), updates that would make a marginal variance non-positive, and
    non-finite proposals (also counted in ``n_nonfinite``, which the caller treats as
    divergence).  ``step`` is the step the sweep applied (the parallel schedule's, else 1).
    """

    skipped: Array = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    n_improper_cavities: int = 0
    n_nonfinite: int = 0
    step: float = 1.0
    coarse: bool = False  # the refresh may have been in single precision: no convergence on this sweep

    @property
    def n_skipped(self) -> int:
        """Site visits skipped in the sweep."""
        return int(self.skipped.size)


def cavity(
    marginal_mean: Array, marginal_var: Array, precision: Array, mean_precision: Array, fraction: float = 1.0
) -> tuple[Array, Array]:
    r"""Cavity of a site: the marginal with the fraction :math:`\eta` of the site divided out.

    .. math::
        \lambda = \big(1/A_{ii} - \eta\,\tau_i\big)^{-1},\qquad
        h = \lambda\,\big(\mu_i / A_{ii} - \eta\,\nu_i\big).

    Floats or arrays.  The variance is ``inf`` or negative where the cavity is improper
    (:math:`1/A_{ii} \le \eta\,\tau_i`); test with ``np.isfinite(var) & (var > 0)``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        var = 1.0 / (1.0 / marginal_var - fraction * precision)
        return var * (marginal_mean / marginal_var - fraction * mean_precision), var


def is_proper(var: Array) -> Array:
    """Where a cavity variance from :func:`cavity` belongs to a proper Gaussian."""
    return np.isfinite(var) & (var > 0.0)


class Posterior(ABC):
    """A Gaussian posterior of ``f`` given site parameters: the protocol inference runs against.

    Attributes
    ----------
    site_precision, site_mean_precision : ndarray of shape (n,)
        The sites :math:`(\\tau, \\nu)`; change them only through :meth:`update_site` or
        :meth:`set_sites` (followed by :meth:`refresh`).
    mean : ndarray of shape (n,)
        Posterior mean :math:`\\mu` at the training points.
    """

    site_precision: Array
    site_mean_precision: Array
    mean: Array
    #: set by a schedule far from a fixed point (the last sweep moved the marginals by over 1%): the
    #: next marginals-only :meth:`refresh` may factorise in single precision (the schedule clears it;
    #: representations that have no such path ignore it)
    coarse: bool = False

    @property
    @abstractmethod
    def n(self) -> int:
        """Number of sites."""

    @property
    @abstractmethod
    def marginal_var(self) -> Array:
        """Posterior marginal variances :math:`A_{ii}`."""

    @property
    def alpha(self) -> Array:
        r""":math:`\alpha = \nu - T\mu` (for a dense prior the predictive weights, :math:`\mu = K\alpha`)."""
        return self.site_mean_precision - self.site_precision * self.mean

    def cavities(self, index: int | Array | slice = slice(None), fraction: float = 1.0) -> tuple[Array, Array]:
        """Cavity means and variances (:func:`cavity`) of the sites ``index``."""
        return cavity(
            self.mean[index],
            self.marginal_var[index],
            self.site_precision[index],
            self.site_mean_precision[index],
            fraction,
        )

    @abstractmethod
    def update_site(self, i: int, precision: float, mean_precision: float) -> bool:
        """Replace site ``i`` and update the posterior; ``False`` (nothing changed) if that would
        make a marginal variance non-positive."""

    @abstractmethod
    def set_sites(self, index: Array | slice, precision: Array, mean_precision: Array) -> None:
        """Overwrite site parameters without updating the posterior; call :meth:`refresh` next."""

    @abstractmethod
    def refresh(self, marginals_only: bool = False) -> None:
        """Recompute the posterior from the sites (``marginals_only``: the mean and marginals suffice)."""

    @abstractmethod
    def log_partition(self) -> float:
        r""":math:`\log Z_q = \log\int N(f|0,K)\prod_i e^{-\tau_i f_i^2/2 + \nu_i f_i} df
        = \tfrac12\nu^\top\mu - \tfrac12\log|I + KT|`."""

    @abstractmethod
    def predict_latent(self, cross_kernel: Array, test_diag: Array) -> tuple[Array, Array]:
        """Latent predictive mean and variance from the prior's cross-covariances and test variances."""

    def apply_sequential(
        self, order: Sequence[int] | Array, propose: SiteProposer, fraction: float = 1.0, block_size: int = 1
    ) -> SweepStats:
        r"""Visit the sites in ``order``, each update applied before the next cavity is formed.

        For each site: its cavity (with ``fraction`` of the site removed); skip it if
        improper; ask ``propose`` for a new site; skip it if not finite or if
        :meth:`update_site` refuses it.  ``block_size`` lets a representation apply the same
        iterates in blocks (the generic loop ignores it).  The posterior is not refreshed.
        """
        skipped: list[int] = []
        improper = nonfinite = 0
        for i in order:
            i = int(i)
            mu_i, a_ii, handle = self._site_view(i)
            tau_i, nu_i = self.site_precision[i], self.site_mean_precision[i]
            cav_mean, cav_var = cavity(mu_i, a_ii, tau_i, nu_i, fraction)
            if not is_proper(cav_var):
                skipped.append(i)
                improper += 1
                continue
            new_tau, new_nu = propose(i, cav_mean, cav_var, tau_i, nu_i, a_ii)
            if not (np.isfinite(new_tau) and np.isfinite(new_nu)):
                skipped.append(i)
                nonfinite += 1
                continue
            if not self._update_viewed_site(i, new_tau, new_nu, handle):
                skipped.append(i)
        return SweepStats(np.sort(np.asarray(skipped, dtype=np.intp)), improper, nonfinite)

    def _site_view(self, i: int) -> tuple[float, float, Any]:
        """Site ``i``'s marginal mean and variance for the sequential loop, and whatever the
        representation wants back in :meth:`_update_viewed_site` (here nothing)."""
        return self.mean[i], self.marginal_var[i], None

    def _update_viewed_site(self, i: int, precision: float, mean_precision: float, handle: Any) -> bool:
        """:meth:`update_site`, given :meth:`_site_view`'s ``handle`` (a representation can reuse its work)."""
        return self.update_site(i, precision, mean_precision)


def _refreshed(name: str, doc: str) -> property:
    """A property that reads ``name`` after a refresh where the sites changed since the last one."""

    def read(self: RefreshedPosterior) -> Any:
        if self._stale:
            self.refresh()
        return getattr(self, name)

    return property(read, doc=doc)


class RefreshedPosterior(Posterior):
    r"""A posterior held as a factorisation that :meth:`refresh` recomputes from the sites, on the first read after
    they change (:class:`~relaxep.posterior.SparsePosterior`,
    :class:`~relaxep.posterior.dense_device.DeviceDensePosterior`).  The sites live on the host in numpy whatever
    the factorisation's array library: the schedules and rules are :math:`O(n)` numpy work, and a refresh moves
    the sites to the factorisation's device and the marginals back.  A refresh sets ``_mean``, ``_var`` and
    ``_log_det``."""

    _stale = True

    def _hold_sites(self, n: int, site_precision: Array | None, site_mean_precision: Array | None) -> None:
        """The sites as float numpy arrays on the host (flat where omitted), checked to have shape ``(n,)``."""
        self.site_precision = np.zeros(n) if site_precision is None else np.array(to_numpy(site_precision), dtype=float)
        self.site_mean_precision = (
            np.zeros(n) if site_mean_precision is None else np.array(to_numpy(site_mean_precision), dtype=float)
        )
        if self.site_precision.shape != (n,) or self.site_mean_precision.shape != (n,):
            raise ValueError(f"site parameters must have shape ({n},)")
        self._stale = True

    mean = _refreshed("_mean", r"Posterior means :math:`\mu_i` (recomputed from the sites if they changed).")
    marginal_var = _refreshed("_var", r"Posterior marginal variances :math:`A_{ii}`.")

    def set_sites(self, index: Array | slice, precision: Array, mean_precision: Array) -> None:
        self.site_precision[index] = precision
        self.site_mean_precision[index] = mean_precision
        self._stale = True

    def log_det_b(self) -> float:
        r""":math:`\log|I + KT|` of the prior's covariance :math:`K`."""
        if self._stale:
            self.refresh()
        return self._log_det

    def log_partition(self) -> float:
        r""":math:`\log Z_q = \tfrac12\nu^\top\mu - \tfrac12\log|I + KT|`."""
        return 0.5 * float(self.site_mean_precision @ self.mean) - 0.5 * self.log_det_b()


class Prior(ABC):
    """A Gaussian process prior at the training inputs, able to make its posterior."""

    #: the array library and device its arrays live in (:mod:`relaxep._xp`): the host's numpy unless a
    #: representation holds another library's arrays (:class:`~relaxep.posterior.SparsePrior`,
    #: :class:`~relaxep.posterior.dense_device.DeviceDensePrior` set their own); the inference methods read it here
    space: ArraySpace = HOST

    @property
    @abstractmethod
    def n(self) -> int:
        """Number of training points (sites)."""

    def posterior(
        self,
        site_precision: Array | None = None,
        site_mean_precision: Array | None = None,
        marginals_only: bool = False,
    ) -> Posterior:
        """The posterior for these sites (flat sites, i.e. the prior, when omitted).  A representation implements
        this, or only :meth:`_posterior_for` (the same with every argument given)."""
        return self._posterior_for(site_precision, site_mean_precision, marginals_only)

    def _posterior_for(self, tau: Array | None, nu: Array | None, marginals_only: bool) -> Posterior:
        """:meth:`posterior` of the sites' precisions ``tau`` and precision-times-means ``nu``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither posterior() nor _posterior_for()")

    def posterior_mean(self, site_precision: Array, site_mean_precision: Array) -> Array:
        """Only the posterior mean for these sites (a representation may do this more cheaply)."""
        return self.posterior(site_precision, site_mean_precision, marginals_only=True).mean

    #: rows of ``X_test`` per block of :meth:`predict_at` (``None``: all at once)
    test_block: int | None = None

    def cross_covariance(self, X_test: Any) -> tuple[Array, Array]:
        r"""What the posterior's ``predict_latent`` takes at ``X_test``: the covariances :math:`K_*` of
        the test inputs to the inputs the representation conditions on, and the prior test variances
        :math:`k_{**}` plus the prior's noise.  Only for a prior built from a kernel."""
        raise NotImplementedError(
            f"this {type(self).__name__} was not built from a kernel (from_kernel): pass K_* and k_** yourself"
        )

    def predict_at(self, predict: Callable[[Array, Array], T], X_test: Any) -> T:
        r"""``predict(K_*, k_**)`` at ``X_test`` (:meth:`cross_covariance`), in blocks of :attr:`test_block`
        rows (memory :math:`O(\text{block} \times M)` for a sparse prior), the blocks' outputs (arrays
        or tuples of arrays) concatenated."""
        rows = self.test_block
        if rows is None:
            return predict(*self.cross_covariance(X_test))
        n = X_test.shape[0]  # (slices end inside the array: the array API does not clip them)
        if getattr(X_test, "ndim", 1) == 2:
            rows_of = lambda s: X_test[s : min(s + rows, n), :]  # noqa: E731
        else:
            rows_of = lambda s: X_test[s : min(s + rows, n)]  # noqa: E731
        parts = [predict(*self.cross_covariance(rows_of(s))) for s in range(0, n, rows)]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]
        return np.concatenate(parts)  # type: ignore[return-value]


class MatrixPrior(Prior):
    """A prior held as its ``n x n`` covariance matrix :attr:`K` (:class:`~relaxep.posterior.DensePrior` on the
    host, :class:`~relaxep.posterior.dense_device.DeviceDensePrior` on another library's device)."""

    #: the ``n x n`` prior covariance
    K: Any
    #: set by ``from_kernel``: the covariance function, the training inputs, the noise on the diagonal
    #: and :math:`\partial K/\partial\theta` (where it was asked for and is kept)
    covariance_function: Any = None
    X: Any = None
    noise: float = 0.0
    kernel_gradient: Array | None = None

    @property
    def n(self) -> int:
        return self.K.shape[0]
