r"""The predictive of a target, :math:`p(y_* | y) = \int p(y_* | f_*) q(f_*)\, df_*`: the methods
:class:`~relaxep.GPRegressor` adds to scikit-learn's (its latent predictions from ``_predict``, on the host)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted, validate_data

from relaxep._typing import Array
from relaxep._xp import namespace, on_device_of, to_numpy
from relaxep.estimators._checks import input_format
from relaxep.estimators._mixture import mixture_interval, mixture_log_density, mixture_moments
from relaxep.likelihoods import Gaussian, Likelihood

__all__ = ["TargetPredictive"]


class TargetPredictive:
    """``predict_y``, ``predict_interval`` and ``log_predictive_density`` from the latent predictive
    (``_predict(X, return_std=True, latent=True)``, host numpy) and the fitted likelihood (``likelihood_``; ``alpha`` as
    Gaussian noise when none); answers in ``X``'s array library."""

    likelihood_: Likelihood | None
    alpha: Any
    _y_train_mean: Any
    _y_train_std: Any

    def _predict(
        self, X: ArrayLike, return_std: bool = False, return_cov: bool = False, latent: bool = False
    ) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _noise_model(self) -> Likelihood:
        """The likelihood of a target given the latent, in normalised units (``alpha`` as Gaussian noise when none)."""
        if self.likelihood_ is not None:
            return self.likelihood_
        noise = float(np.mean(np.asarray(self.alpha, dtype=float)))  # (an array alpha: its mean)
        return Gaussian(noise=max(noise, np.finfo(float).tiny), noise_bounds="fixed")

    def _single_output(self, what: str) -> tuple[Array, Array]:
        if np.ndim(self._y_train_mean) and np.size(self._y_train_mean) > 1:
            raise ValueError(f"{what} is for a single output; this fit has {np.size(self._y_train_mean)}")
        return float(np.ravel(self._y_train_mean)[0]), float(np.ravel(self._y_train_std)[0])

    def _mixture(self, X: ArrayLike) -> list[Any] | None:
        """An integrated fit's points at ``X`` (:meth:`MixtureModel.components
        <relaxep.estimators._mixture.MixtureModel.components>`, normalised units), ``None`` for one fit."""
        if not hasattr(self, "hyper_samples_"):  # (one fit: no mixture)
            return None
        X = validate_data(self, X, reset=False, **input_format(self.kernel_, X))  # type: ignore[attr-defined]
        return self.model_.components(X, self._noise_model())  # type: ignore[attr-defined]

    def predict_y(self, X: ArrayLike) -> tuple[Array, Array]:
        r"""Mean and standard deviation of the predictive of a target, :math:`p(y_* | y) = \int p(y_* | f_*)
        q(f_*)\, df_*` (the likelihood's noise included; infinite for a Student-t with ``df <= 2``)."""
        check_is_fitted(self)
        mu, sd = self._single_output("predict_y")
        if (points := self._mixture(X)) is not None:
            m, v = mixture_moments(points)
            return _like(X, mu + sd * m, sd * np.sqrt(v))
        mean, std = self._predict(X, return_std=True, latent=True)
        m, v = self._noise_model().predict_y((mean - mu) / sd, (std / sd) ** 2)
        return _like(X, mu + sd * m, sd * np.sqrt(v))

    def predict_interval(self, X: ArrayLike, level: float = 0.95) -> tuple[Array, Array]:
        """The central ``level`` interval of the predictive of a target at ``X`` (not Gaussian in general)."""
        check_is_fitted(self)
        mu, sd = self._single_output("predict_interval")
        if (points := self._mixture(X)) is not None:
            low, high = mixture_interval(points, level)
            return _like(X, mu + sd * low, mu + sd * high)
        mean, std = self._predict(X, return_std=True, latent=True)
        low, high = self._noise_model().predict_interval((mean - mu) / sd, (std / sd) ** 2, level)
        return _like(X, mu + sd * low, mu + sd * high)

    def log_predictive_density(self, X: ArrayLike, y: ArrayLike) -> Array:
        r"""Pointwise :math:`\log p(y_* | y) = \log\int p(y_* | f_*) q(f_*)\, df_*` (the test NLPD: minus its mean)."""
        check_is_fitted(self)
        mu, sd = self._single_output("log_predictive_density")
        if (points := self._mixture(X)) is not None:
            y = np.asarray(to_numpy(y), dtype=float).reshape(-1)
            if y.shape != points[0][1].shape:
                raise ValueError(f"y must have shape {points[0][1].shape} (one target per row of X), got {y.shape}")
            return _like(X, mixture_log_density(points, (y - mu) / sd) - np.log(sd))[0]
        mean, std = self._predict(X, return_std=True, latent=True)
        y = np.asarray(to_numpy(y), dtype=float).reshape(-1)
        if y.shape != mean.shape:
            raise ValueError(f"y must have shape {mean.shape} (one target per row of X), got {y.shape}")
        tilted = self._noise_model().log_z((y - mu) / sd, (mean - mu) / sd, np.maximum((std / sd) ** 2, 1e-300))
        return _like(X, tilted.log_z - np.log(sd))[0]


def _like(X: Any, *arrays: Array) -> tuple[Any, ...]:
    """``arrays`` (numpy) in ``X``'s library and device (:mod:`relaxep._xp`)."""
    return arrays if namespace(X).on_host else tuple(on_device_of(np.asarray(a), X) for a in arrays)


def is_count_model(likelihood: Likelihood | None) -> bool:
    """Whether ``likelihood`` is a count likelihood (Poisson, negative binomial): ``predict`` then gives the
    predictive mean (and sd) of the count, as scikit-learn's ``PoissonRegressor`` does, not the latent's."""
    return likelihood is not None and likelihood.kind == "count"


def log_exposure(exposure: ArrayLike | None, n: int, likelihood: Likelihood | None, normalize_y: bool) -> Array | None:
    r"""The log exposure :math:`o_i` of a count model (:math:`E[y_i | f] = e^{f_i + o_i}`), checked: ``None``
    where none is given; ``ValueError`` naming ``exposure`` for one that is not ``n`` positive finite numbers or
    is given to a model of other targets, and naming ``normalize_y`` for counts that would be rescaled."""
    counts = is_count_model(likelihood)
    if counts and normalize_y:
        raise ValueError("normalize_y: counts are not rescaled (a count likelihood models them as they are); set False")
    if exposure is None:
        return None
    if not counts:
        raise ValueError(f"exposure is for count likelihoods (Poisson, NegativeBinomial), not {likelihood!r}")
    exposure = np.asarray(exposure, dtype=float)
    if exposure.shape != (n,) or not np.all(np.isfinite(exposure)) or np.any(exposure <= 0.0):
        shape = exposure.shape != (n,)
        got = f"shape {exposure.shape}" if shape else f"values from {exposure.min():.3g} to {exposure.max():.3g}"
        raise ValueError(f"exposure must be {n} positive finite numbers (one per row of X), got {got}")
    return np.log(exposure)
