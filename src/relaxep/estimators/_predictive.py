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

    def _offset(self, X: ArrayLike, exposure: ArrayLike | None, trials: ArrayLike | None) -> dict[str, Array]:
        """``{"log_exposure": o}`` for a count model's test rows (their exposure or trials, checked; 0 where none is
        given), ``{}`` for other targets (where either is refused, naming it)."""
        likelihood = self.likelihood_
        n = _rows(X)
        offset = log_exposure(exposure, n, likelihood, False, trials)
        if not is_count_model(likelihood):
            return {}
        return {"log_exposure": np.zeros(n) if offset is None else offset}

    def predict_y(
        self, X: ArrayLike, exposure: ArrayLike | None = None, trials: ArrayLike | None = None
    ) -> tuple[Array, Array]:
        r"""Mean and standard deviation of the predictive of a target, :math:`p(y_* | y) = \int p(y_* | f_*)
        q(f_*)\, df_*` (the likelihood's noise included; infinite for a Student-t with ``df <= 2``); a count model's
        at each row's ``exposure`` (a binomial's ``trials``), 1 where none is given."""
        check_is_fitted(self)
        mu, sd = self._single_output("predict_y")
        extra = self._offset(X, exposure, trials)
        if (points := self._mixture(X)) is not None:
            m, v = mixture_moments(points, **extra)
            return _like(X, mu + sd * m, sd * np.sqrt(v))
        mean, std = self._predict(X, return_std=True, latent=True)
        m, v = self._noise_model().predict_y((mean - mu) / sd, (std / sd) ** 2, **extra)
        return _like(X, mu + sd * m, sd * np.sqrt(v))

    def predict_interval(
        self, X: ArrayLike, level: float = 0.95, exposure: ArrayLike | None = None, trials: ArrayLike | None = None
    ) -> tuple[Array, Array]:
        """The central ``level`` interval of the predictive of a target at ``X`` (not Gaussian in general); a count
        model's at each row's ``exposure`` (a binomial's ``trials``), 1 where none is given."""
        check_is_fitted(self)
        mu, sd = self._single_output("predict_interval")
        extra = self._offset(X, exposure, trials)
        if (points := self._mixture(X)) is not None:
            if exposure is not None or trials is not None:
                raise ValueError(
                    "exposure/trials: an integrated fit's (integrate=...) predict_interval is at unit exposure or one "
                    "trial; fit with integrate='map' for intervals at other exposures"
                )
            low, high = mixture_interval(points, level)
            return _like(X, mu + sd * low, mu + sd * high)
        mean, std = self._predict(X, return_std=True, latent=True)
        low, high = self._noise_model().predict_interval((mean - mu) / sd, (std / sd) ** 2, level, **extra)
        return _like(X, mu + sd * low, mu + sd * high)

    def log_predictive_density(
        self, X: ArrayLike, y: ArrayLike, exposure: ArrayLike | None = None, trials: ArrayLike | None = None
    ) -> Array:
        r"""Pointwise :math:`\log p(y_* | y) = \log\int p(y_* | f_*) q(f_*)\, df_*` (the test NLPD: minus its mean); a
        count model's at each row's ``exposure`` (a binomial's successes out of ``trials``), 1 where none is given."""
        check_is_fitted(self)
        mu, sd = self._single_output("log_predictive_density")
        extra = self._offset(X, exposure, trials)
        y = np.asarray(to_numpy(y), dtype=float).reshape(-1)
        n = _rows(X)
        if y.shape != (n,):
            raise ValueError(f"y must have shape {(n,)} (one target per row of X), got {y.shape}")
        target = (y - mu) / sd if not extra else np.column_stack([y, extra["log_exposure"]])
        if extra:
            self._noise_model().check_targets(target)  # (successes above their trials, negative counts: named)
        if (points := self._mixture(X)) is not None:
            return _like(X, mixture_log_density(points, target) - np.log(sd))[0]
        mean, std = self._predict(X, return_std=True, latent=True)
        tilted = self._noise_model().log_z(target, (mean - mu) / sd, np.maximum((std / sd) ** 2, 1e-300))
        return _like(X, tilted.log_z - np.log(sd))[0]


def _rows(X: ArrayLike) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)  # type: ignore[arg-type]


def _like(X: Any, *arrays: Array) -> tuple[Any, ...]:
    """``arrays`` (numpy) in ``X``'s library and device (:mod:`relaxep._xp`)."""
    return arrays if namespace(X).on_host else tuple(on_device_of(np.asarray(a), X) for a in arrays)


def is_count_model(likelihood: Likelihood | None) -> bool:
    """Whether ``likelihood`` is a count likelihood (Poisson, negative binomial): ``predict`` then gives the
    predictive mean (and sd) of the count, as scikit-learn's ``PoissonRegressor`` does, not the latent's."""
    return likelihood is not None and likelihood.kind == "count"


def log_exposure(
    exposure: ArrayLike | None,
    n: int,
    likelihood: Likelihood | None,
    normalize_y: bool,
    trials: ArrayLike | None = None,
) -> Array | None:
    r"""The log exposure :math:`o_i` of a count model (:math:`E[y_i | f] = e^{f_i + o_i}`; a binomial's log trials),
    checked: ``None`` where none is given; ``ValueError`` naming ``exposure`` (``trials``) for one that is not ``n``
    positive finite numbers (whole numbers of trials) or is given to a model of other targets, and naming
    ``normalize_y`` for counts that would be rescaled."""
    counts = is_count_model(likelihood)
    if counts and normalize_y:
        raise ValueError("normalize_y: counts are not rescaled (a count likelihood models them as they are); set False")
    wanted = likelihood.exposure_name if counts else None  # type: ignore[union-attr]
    for name, value in (("exposure", exposure), ("trials", trials)):
        if value is not None and name != wanted:
            owner = "Binomial" if name == "trials" else "count likelihoods (Poisson, NegativeBinomial, ...)"
            also = f"; {likelihood!r} takes {wanted}=" if wanted else ""
            raise ValueError(f"{name} is for {owner}, not {likelihood!r}{also}")
    value = exposure if wanted == "exposure" else trials
    if value is None:
        return None
    value = np.asarray(value, dtype=float)
    if value.shape != (n,) or not np.all(np.isfinite(value)) or np.any(value <= 0.0):
        shape = value.shape != (n,)
        got = f"shape {value.shape}" if shape else f"values from {value.min():.3g} to {value.max():.3g}"
        raise ValueError(f"{wanted} must be {n} positive finite numbers (one per row of X), got {got}")
    if wanted == "trials" and np.any(value != np.round(value)):
        raise ValueError("trials must be whole numbers (the number of trials of each row)")
    return np.log(value)
