r"""The hyperparameter vector a search moves: the kernels' log-hyperparameters, the likelihood's, a prior mean, the
inducing inputs.

.. math::
    x = (\log\theta_{\text{kernel}_1}, \dots,\ \log\theta_{\text{likelihood}},\ c,\ \operatorname{vec}(Z))

in that order (several kernels where the model has several latent functions, as the two-latent model's
:math:`(\theta_f, \theta_g)`; ``Z`` row by row, only where it is learned; :math:`c` a learned constant prior mean,
:class:`ConstantMean`, itself a log where it is one of a log noise variance).  The kernels', the likelihood's and
the mean's entries are bounded (their ``bounds``, in log space); the inducing inputs are not.  Written once for
every search (the dense and sparse EP evidence, the closed-form Gaussian model, the stochastic search, Dask's
search over shards, the two-latent model): a new learned block (ordinal cut-points) is one more field here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep.hyper.log_prior import Entry
from relaxep.likelihoods import Likelihood

__all__ = ["ConstantMean", "HyperVector"]

#: scikit-learn's words, so that code matching its error matches ours
RESTARTS_NEED_BOUNDS = "Multiple optimizer restarts (n_restarts_optimizer>0) requires that all bounds are finite."


class ConstantMean:
    """A constant prior mean :math:`c` of a latent process, learned within ``bounds`` (a pair) or fixed (``None``).

    It answers as a kernel's block does: :attr:`theta` (:math:`c` itself, or nothing where fixed), :attr:`bounds`
    and :meth:`clone_with_theta`.
    """

    def __init__(self, value: float, bounds: Any = None) -> None:
        self.value, self.bounds_ = float(value), bounds

    @property
    def theta(self) -> Array:
        return np.zeros(0) if self.bounds_ is None else np.array([self.value])

    @property
    def bounds(self) -> Array:
        return np.zeros((0, 2)) if self.bounds_ is None else np.reshape(np.asarray(self.bounds_, dtype=float), (1, 2))

    def clone_with_theta(self, theta: Array) -> ConstantMean:
        return ConstantMean(float(theta[0]) if self.bounds_ is not None else self.value, self.bounds_)


def _blocks(kernel: Kernel | tuple[Kernel, ...]) -> tuple[Kernel, ...]:
    return tuple(kernel) if isinstance(kernel, tuple) else (kernel,)


class HyperVector:
    """The optimiser's vector of ``kernel`` (or a tuple of kernels), ``likelihood`` (``None``: no likelihood block),
    ``mean`` (``None``: none learned) and, where learned, ``Z``.

    Parameters
    ----------
    kernel : Kernel or tuple of Kernel
    likelihood : Likelihood or None
    Z : ndarray of shape (M, d) or None
        The inducing inputs where they are learned (their current value: the start's).
    mean : ConstantMean or None
    """

    def __init__(
        self,
        kernel: Kernel | tuple[Kernel, ...],
        likelihood: Likelihood | None = None,
        Z: Array | None = None,
        mean: ConstantMean | None = None,
    ) -> None:
        self.kernel, self.likelihood, self.mean = kernel, likelihood, mean
        self.Z = None if Z is None else np.asarray(Z, dtype=float)
        self.kernel_sizes = [k.theta.size for k in _blocks(kernel)]
        self.n_kernel = sum(self.kernel_sizes)
        self.n_likelihood = 0 if likelihood is None else likelihood.theta.size
        self.n_mean = 0 if mean is None else mean.theta.size
        self.n_theta = self.n_kernel + self.n_likelihood + self.n_mean

    @property
    def size(self) -> int:
        return self.n_theta + (0 if self.Z is None else self.Z.size)

    def _parts(self) -> list[Any]:
        return [*_blocks(self.kernel), *(b for b in (self.likelihood, self.mean) if b is not None)]

    @property
    def theta(self) -> Array:
        """The bounded part: the kernels', the likelihood's and the mean's (log-)hyperparameters."""
        return np.concatenate([np.asarray(b.theta, dtype=float) for b in self._parts()])

    @property
    def theta_bounds(self) -> Array:
        """``(n_theta, 2)`` log-space bounds of :attr:`theta` (a kernel with all its hyperparameters fixed has
        bounds of shape ``(0,)``, not ``(0, 2)``)."""
        return np.vstack([np.reshape(b.bounds, (-1, 2)) for b in self._parts()])

    @property
    def bounds(self) -> Array:
        """``(size, 2)`` bounds of the whole vector, NaN for the (unbounded) inducing inputs."""
        extra = 0 if self.Z is None else self.Z.size
        return np.vstack([self.theta_bounds, np.full((extra, 2), np.nan)])

    @property
    def x0(self) -> Array:
        """The start: the current hyperparameters and inducing inputs."""
        return self.pack(self.theta, self.Z)

    def pack(self, theta: Array, Z: Array | None = None) -> Array:
        """The vector of ``theta`` (kernels, likelihood, mean) and ``Z`` (``None``: not learned)."""
        parts = [np.asarray(theta, dtype=float)]
        if self.Z is not None:
            parts.append(np.asarray(self.Z if Z is None else Z, dtype=float).ravel())
        return np.concatenate(parts)

    def split(self, x: Array) -> tuple[Any, Likelihood | None, Array | None]:
        """``x`` as (kernel, or the tuple of kernels; likelihood; ``Z`` or ``None`` where not learned), each a new
        object (the mean: :meth:`mean_at`)."""
        ends = np.cumsum([0, *self.kernel_sizes])
        kernels = tuple(
            k.clone_with_theta(x[a:b]) for k, a, b in zip(_blocks(self.kernel), ends[:-1], ends[1:], strict=True)
        )
        likelihood = self.likelihood
        if likelihood is not None and self.n_likelihood:
            likelihood = likelihood.clone_with_theta(x[self.n_kernel : self.n_kernel + self.n_likelihood])
        Z = None if self.Z is None else np.reshape(x[self.n_theta :], self.Z.shape)
        return (kernels if isinstance(self.kernel, tuple) else kernels[0]), likelihood, Z

    def entries(self) -> list[Entry]:
        """Each entry of :attr:`theta` named (:class:`~relaxep.hyper.log_prior.Entry`): a kernel's hyperparameters by
        scikit-learn's names (``"k2__length_scale"``; in a tuple of kernels prefixed ``"kernel0__"``, ``"kernel1__"``),
        the likelihood's as ``"likelihood__<name>"``, the mean as ``"mean"``; what the priors are resolved over."""
        blocks = _blocks(self.kernel)
        out: list[Entry] = []
        for b, kernel in enumerate(blocks):
            prefix = f"kernel{b}__" if isinstance(self.kernel, tuple) else ""
            for h in kernel.hyperparameters:
                if not h.fixed:
                    out += [Entry(prefix + h.name, b, j, h.n_elements) for j in range(h.n_elements)]
        if self.likelihood is not None and self.n_likelihood:
            powers = self.likelihood.output_scale_hyperparameters
            for h in self.likelihood.hyperparameters:
                if not h.fixed:
                    size = h.n_elements
                    out += [Entry(f"likelihood__{h.name}", -1, j, size, powers.get(h.name, 0)) for j in range(size)]
        out += [Entry("mean", -1)] * self.n_mean
        if len(out) != self.n_theta:  # pragma: no cover - a block whose theta and hyperparameters disagree
            raise RuntimeError(f"named {len(out)} entries of a theta of {self.n_theta}")
        return out

    def mean_at(self, x: Array) -> ConstantMean | None:
        """``x``'s mean block (a new object), ``None`` where the vector has none."""
        if self.mean is None:
            return None
        start = self.n_kernel + self.n_likelihood
        return self.mean.clone_with_theta(np.asarray(x, dtype=float)[start : start + self.n_mean])

    def starts(self, n_restarts: int, rng: np.random.RandomState) -> list[Array]:
        """The start :attr:`x0` and ``n_restarts`` more, ``theta`` uniform within its (finite) log-space bounds
        and ``Z`` as it is."""
        self.check_restarts(n_restarts)
        bounds = self.theta_bounds
        return [self.x0] + [self.pack(rng.uniform(bounds[:, 0], bounds[:, 1])) for _ in range(n_restarts)]

    def check_restarts(self, n_restarts: int) -> None:
        """Refuse restarts without finite bounds before any work (scikit-learn's error)."""
        if n_restarts > 0 and self.n_theta and not np.all(np.isfinite(self.theta_bounds)):
            raise ValueError(RESTARTS_NEED_BOUNDS)
