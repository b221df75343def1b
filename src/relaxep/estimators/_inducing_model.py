r"""A fitted sparse model held at its inducing inputs alone: what a Dask estimator's ``to_local()`` hands over.

A FITC posterior predicts from :math:`M \times M` pieces only (Snelson & Ghahramani 2006): with
:math:`a_* = L_{uu}^{-1}k_{u*}`,

.. math:: \mu_* = a_*^\top m,\qquad s^2_* = k_{**} - \|a_*\|^2 + \|L_B^{-1}a_*\|^2,

where :math:`L_{uu}` is the Cholesky factor of :math:`K_{uu}`, :math:`L_B` that of
:math:`B = I + \sum_i w_i v_iv_i^\top` and :math:`m = B^{-1}b`.  :class:`InducingModel` keeps those three,
the kernel, the inducing inputs and the likelihood, and answers as the single-process model
(``_LatentModel``) does through the same block function
(:func:`~relaxep.posterior.fitc_rows.predict_rows`): a ``GPClassifier`` or ``GPRegressor`` holding it
as ``model_`` predicts as the Dask estimator that fitted it, and pickles in :math:`O(M^2 + Md)` bytes,
without the :math:`n` training rows, which stay on the cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._xp import HOST, to_numpy
from relaxep.estimators._model import LooTerms, loo_not_implemented
from relaxep.estimators._models import _BinaryModel
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import chunks, multiply_rows, predict_rows, rows_per_block, solve_rows

__all__ = ["InducingBinaryModel", "InducingModel"]


class InducingModel:
    """One latent function's sparse posterior summarised at the inducing inputs (module docstring).

    Parameters
    ----------
    kernel : Kernel
        The fitted kernel (``kernel_``).
    likelihood : Likelihood
        The fitted likelihood.
    Z : ndarray of shape (M, d)
        The inducing inputs.
    L_uu, chol_inv, m : ndarray
        :math:`L_{uu}`, :math:`L_B^{-1}` and :math:`m`.
    noise : float
        Latent noise added to the test variances (the fit's jitter).
    result : object
        The fit's record (``status``, ``n_sweeps``, ``log_evidence``, ...), kept as ``result_``.
    """

    #: the search of the fit (a Dask estimator's, set after the fit), whose prior ``log_prior()`` reads
    search: Any = None

    def __init__(
        self, kernel: Kernel, likelihood: Likelihood, Z: Array, L_uu: Array, chol_inv: Array, m: Array,
        noise: float, result: Any,
    ) -> None:  # fmt: skip
        self.kernel_, self.likelihood, self.Z = kernel, likelihood, np.asarray(Z, dtype=float)
        self.L_uu, self.chol_inv, self.m = (np.asarray(a, dtype=float) for a in (L_uu, chol_inv, m))
        self.noise, self.result_ = float(noise), result

    def predict_latent(self, X: Any, full_cov: bool = False) -> tuple[Array, Array]:
        """Latent predictive mean and variance at ``X``, in blocks of rows (memory ``O(block x M)``); with
        ``full_cov`` mean and covariance (:meth:`_predict_latent_cov`)."""
        if full_cov:
            return self._predict_latent_cov(X)
        X = np.asarray(to_numpy(X), dtype=float)
        mean, var = np.empty(X.shape[0]), np.empty(X.shape[0])
        size = rows_per_block(self.Z.shape[0])
        for rows in chunks(X.shape[0], size):
            block = X[rows]
            cross = np.asarray(self.kernel_(block, self.Z), dtype=float)
            diag = np.asarray(self.kernel_.diag(block), dtype=float) + self.noise
            mean[rows], var[rows] = predict_rows(HOST, self.L_uu, self.m, self.chol_inv, cross, diag, size)
        return mean, var

    def _predict_latent_cov(self, X: Any) -> tuple[Array, Array]:
        r"""Latent predictive mean and covariance, :math:`K_{**} + \sigma^2 I - A^\top A + R^\top R` (the latent noise
        :math:`\sigma^2` as in the variances) with
        :math:`A = L_{uu}^{-1}K_{u*}`, :math:`R = L_B^{-1}A` (as ``SparsePosterior.predict_latent_cov``)."""
        X = np.asarray(to_numpy(X), dtype=float)
        a = solve_rows(HOST, self.L_uu, np.asarray(self.kernel_(X, self.Z), dtype=float))
        r = multiply_rows(HOST, self.chol_inv, a)
        cov = np.asarray(self.kernel_(X), dtype=float) + self.noise * np.eye(X.shape[0]) - a @ a.T + r @ r.T
        return a @ self.m, 0.5 * (cov + cov.T)

    def loo_terms(self) -> LooTerms:
        """Refused: the cavities stay on the cluster that fitted the model (the Dask estimator's ``loo()`` has
        them)."""
        raise loo_not_implemented("a model fitted on a Dask cluster (its training rows stay there)")

    def log_evidence(self, theta: Array, eval_gradient: bool, clone_kernel: bool) -> Any:
        """Refused: the evidence at other hyperparameters needs the training rows, which this model does not hold."""
        raise ValueError(
            "theta: this model was fitted on a Dask cluster and holds only its posterior at the inducing inputs; "
            "the evidence at other hyperparameters needs the training rows (fit the Dask estimator again). Its "
            "value at the fitted ones is log_marginal_likelihood_value_ (log_marginal_likelihood() without theta)"
        )


class InducingBinaryModel(InducingModel):
    """:class:`InducingModel` of a binary classifier: the likelihood's log-odds and probabilities, as
    ``_BinaryModel``'s."""

    decision_function = _BinaryModel.decision_function
    predict_log_proba = _BinaryModel.predict_log_proba
    predict_proba = _BinaryModel.predict_proba
