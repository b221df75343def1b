r"""Brute-force leave-one-out, the oracle for the cavities' values: :math:`n` refits at the fitted hyperparameters.

For each row :math:`i` the model's inference runs on the other :math:`n - 1` rows, from the full fit's sites
with site :math:`i` removed (a warm start: the fixed point moves little), and
:math:`\log p(y_i | y_{-i}) = \log\int p(y_i | f) N(f | \mu_{*}, s^2_{*}) df` at the refit's predictive of
:math:`f(x_i)`.  The kernel, the likelihood's parameters, the inducing inputs and the rule stay as fitted: what
the cavities approximate (:mod:`relaxep.inference.loo`).  :math:`O(n)` fits: for tests and studies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from relaxep._typing import Array
from relaxep._xp import to_numpy
from relaxep.inference import InferenceMethod, infer
from relaxep.inference.warm import Sites

__all__ = ["brute_force_loo"]


def brute_force_loo(estimator: Any, rows: Array | None = None, tol: float | None = None) -> Array:
    r""":math:`\log p(y_i | y_{-i})` by refitting without row :math:`i` (module docstring), in the model's units
    (a regressor's ``normalize_y`` not undone), for ``rows`` (default all); ``tol`` the refits' (default the
    estimator's).  One-latent models (``model_`` with ``priors``, ``rule``, ``X``, ``y``) only."""
    check_is_fitted(estimator, "model_")  # (a regressor predicts from its prior unfitted: model_ is the test)
    model = estimator.model_
    if not hasattr(model, "priors"):
        raise NotImplementedError(f"brute_force_loo: {type(model).__name__} is not a one-latent EP model")
    X, y, result = model.X, np.asarray(to_numpy(model.y)), model.result_
    tau, nu = (np.asarray(to_numpy(a), dtype=float) for a in (result.site_precision, result.site_mean_precision))
    relax = np.asarray(to_numpy(result.relaxation), dtype=float)
    n = y.shape[0]
    rows = np.arange(n) if rows is None else np.asarray(rows)
    options = {} if isinstance(model.rule, InferenceMethod) else {"schedule": model.schedule}
    out = np.empty(rows.shape[0])
    for k, i in enumerate(rows):
        keep = np.arange(n) != i
        prior = model.priors.build(model.kernel_, X[keep], model.Z, False)
        fit = infer(
            prior, y[keep], model.likelihood, model.rule, init=Sites(tau[keep], nu[keep], relax[keep]),
            max_sweeps=model.max_sweeps, tol=model.tol if tol is None else tol, **options,
        )  # fmt: skip
        mean, var = (np.asarray(to_numpy(a), dtype=float) for a in prior.predict_at(fit.predict_latent, X[i : i + 1]))
        out[k] = float(model.likelihood.log_z(y[i : i + 1], mean, var, 1.0).log_z[0])
    return out
