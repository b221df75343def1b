r"""What the joint multi-class posteriors share: the label differences, batched cavities, the protocol.

A joint posterior is one representation of :math:`q(f) \propto p(f) \prod_i \tilde t_i(f_i)` for
:math:`C` latent functions, :math:`f_i \in \mathbb{R}^C`, whose sites depend on :math:`f_i`
only through the :math:`C - 1` label differences :math:`w_i = B_i^T f_i`,
:math:`B_i = [e_{y_i} - e_{o_j}]_j` (:math:`o_1 < \dots < o_{C-1}` the other classes).  Every
representation answers the same calls (:class:`JointPosterior`), so one damped parallel loop
(:func:`relaxep.inference.damped_parallel.damped_parallel_ep`) runs them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import ArrayLike

from relaxep._typing import Array

__all__ = ["JointPosterior", "JointPosteriorBase", "Proposal", "batched_cavities"]


def batched_cavities(cov: Array, mean: Array, site_precision: Array, site_shift: Array) -> tuple[Array, Array, Array]:
    r"""Per-point cavities from the marginals :math:`N(\mu_i, \Sigma_i)` and Gaussian sites
    :math:`(P_i, b_i)`: :math:`\Lambda_i = \Sigma_i^{-1} - P_i`, :math:`m_i = \Lambda_i^{-1}(\Sigma_i^{-1}\mu_i - b_i)`.

    Returns ``(m, Lambda^{-1}, ok)``, ``ok`` marking the proper cavities (smallest eigenvalue of
    :math:`\Lambda_i` above 1e-10 of its largest); an improper one is replaced by the identity so
    that the batch stays finite (its site is kept this sweep).
    """
    d = cov.shape[1]
    inv = np.linalg.inv(cov)
    inv = 0.5 * (inv + np.swapaxes(inv, 1, 2))
    Lam = inv - site_precision
    h = np.einsum("nij,nj->ni", inv, mean) - site_shift
    w = np.linalg.eigvalsh(Lam)
    ok = w[:, 0] > 1e-10 * np.abs(w[:, -1])
    Lam = np.where(ok[:, None, None], Lam, np.eye(d))
    V = np.linalg.inv(Lam)
    V = 0.5 * (V + np.swapaxes(V, 1, 2))
    return np.einsum("nij,nj->ni", V, h), V, ok


def predict_in_chunks(
    n_train: int,
    n_classes: int,
    predict_block: Callable[[Array, Array, int], tuple[Array, Array]],
    K_star: ArrayLike | list[Array],
    k_diag: ArrayLike,
) -> tuple[Array, Array]:
    """Check and broadcast the test covariances to ``(C, n_*, n)`` and ``(C, n_*)``, then call
    ``predict_block(Kx, kd, n_*)`` on row blocks of 1000 (which bound the temporaries)."""
    C = n_classes
    Kx = np.asarray(K_star, dtype=float) if not isinstance(K_star, list) else np.stack(K_star)
    Kx = np.broadcast_to(Kx, (C, *Kx.shape[-2:])) if Kx.ndim == 2 else Kx
    kd = np.broadcast_to(np.asarray(k_diag, dtype=float), (C, Kx.shape[1]))
    ns = Kx.shape[1]
    if Kx.shape[2] != n_train:
        raise ValueError(f"K_star must have {n_train} columns (training points), got {Kx.shape[2]}")
    chunk = 1000  # bounds the temporaries (C arrays of n x chunk) for large test sets
    if ns > chunk:
        parts = [
            predict_in_chunks(n_train, C, predict_block, list(Kx[:, s : s + chunk]), kd[:, s : s + chunk])
            for s in range(0, ns, chunk)
        ]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return predict_block(Kx, kd, ns)


@dataclass(frozen=True)
class Proposal:
    """The sites one parallel sweep moves toward, and how many points kept theirs (improper cavity)."""

    sites: tuple[Array, Array]
    n_skipped: int


class JointPosterior(Protocol):
    """The calls of a joint multi-class posterior (nested EP, the robust max's dense EP).

    A posterior is immutable: :meth:`with_sites` returns a new one.  ``mean``/``marginal_var``
    are the marginals of the variable EP runs on (``f`` for nested EP, ``w`` for the robust max),
    those the convergence statistic compares between sweeps.
    """

    #: the parallel step a run starts with when none is given
    default_damping: float
    likelihood: Any
    n_classes: int
    sites: tuple[Array, Array]

    @property
    def mean(self) -> Array: ...

    @property
    def marginal_var(self) -> Array: ...

    def cavities(self) -> tuple[Array, Array, Array]:
        """``(mean, cov, ok)`` of every point's cavity (``ok``: proper)."""
        ...

    def propose(self) -> Proposal:
        """The new sites of one parallel sweep from the current cavities (improper ones keep their sites)."""
        ...

    def with_sites(self, proposal: Proposal, step: float) -> JointPosterior:
        """The posterior with every site moved ``step`` of the way to ``proposal``.

        Raises ``numpy.linalg.LinAlgError`` where that posterior is improper.
        """
        ...

    def log_evidence(self) -> float:
        """EP's :math:`\\log Z_{EP}` at these sites (``nan`` where a cavity is improper)."""
        ...

    def latent_marginals(self) -> tuple[Array, Array]:
        """Mean ``(n, C)`` and covariance ``(n, C, C)`` of the latents at the training points."""
        ...

    def predict_latent(self, K_star: ArrayLike | list[Array], k_diag: ArrayLike) -> tuple[Array, Array]:
        """Predictive mean ``(n_*, C)`` and covariance ``(n_*, C, C)`` of the latents at test points."""
        ...

    def evidence_gradient(self, dK: ArrayLike) -> Array:
        """Gradient of :math:`\\log Z_{EP}` in the hyperparameters of a kernel shared by the classes."""
        ...


class JointPosteriorBase:
    """What both joint posteriors are built from: the kernels, the labels, the number of classes, the likelihood,
    their sites (a pair of arrays) and the prior's pieces that do not depend on the sites (computed once a run,
    :meth:`prior_of`, and handed from each posterior to the next).

    Parameters
    ----------
    kernels : list of ndarray (n, n)
        One prior covariance per class (the same array repeated for a shared kernel).
    labels : ndarray of int (n,)
    n_classes : int
    likelihood : MulticlassLikelihood
    sites : tuple of two ndarrays
        The sites, as the representation holds them.
    prior : object, optional
        :meth:`prior_of` the kernels and labels, where the caller has it.

    Raises ``numpy.linalg.LinAlgError`` where the sites make the posterior improper.
    """

    #: the parallel step a run starts with when none is given
    default_damping: ClassVar[float]

    def __init__(
        self, kernels: list[Array], labels: Array, n_classes: int, likelihood: Any, sites: tuple[Array, Array],
        prior: Any = None,
    ) -> None:  # fmt: skip
        self.kernels, self.labels, self.n_classes, self.likelihood = kernels, labels, n_classes, likelihood
        self._prior = self.prior_of(kernels, labels, n_classes) if prior is None else prior
        self._set_sites(*sites)

    @staticmethod
    def prior_of(kernels: list[Array], labels: Array, n_classes: int) -> Any:
        """The prior's pieces that the sites do not change."""
        raise NotImplementedError

    @staticmethod
    def zero_sites(n: int, n_classes: int) -> tuple[Array, Array]:
        """Flat sites for ``n`` points."""
        raise NotImplementedError

    def _set_sites(self, first: Array, second: Array) -> None:
        """Hold the sites and factor the posterior (``numpy.linalg.LinAlgError`` where it is improper)."""
        raise NotImplementedError

    @classmethod
    def start(
        cls, kernels: list[Array], labels: Array, n_classes: int, likelihood: Any, sites: tuple[Array, Array] | None
    ) -> Any:
        """The posterior at ``sites`` (a warm start) where they fit these labels and kernels, else at zero sites."""
        prior = cls.prior_of(kernels, labels, n_classes)
        zero = cls.zero_sites(labels.size, n_classes)
        if sites is not None and sites[0].shape == zero[0].shape:
            try:
                return cls(kernels, labels, n_classes, likelihood, (sites[0].copy(), sites[1].copy()), prior)
            except np.linalg.LinAlgError:  # warm sites improper under this prior: start afresh
                pass
        return cls(kernels, labels, n_classes, likelihood, zero, prior)

    def with_sites(self, proposal: Proposal, step: float) -> Any:
        r"""The posterior at :math:`(1 - s)\,\text{sites} + s\,\text{proposal}`, each of the two site arrays
        interpolated (and tidied by :meth:`_tidy`)."""
        (first, second), (first_new, second_new) = self.sites, proposal.sites
        first_try = self._tidy((1.0 - step) * first + step * first_new)
        return self._moved((first_try, (1.0 - step) * second + step * second_new))

    @staticmethod
    def _tidy(first: Array) -> Array:
        """The first site array as a posterior takes it (unchanged; a symmetric matrix symmetrised)."""
        return first

    def _moved(self, sites: tuple[Array, Array]) -> Any:
        """The posterior of the same prior at ``sites``."""
        return type(self)(self.kernels, self.labels, self.n_classes, self.likelihood, sites, self._prior)
