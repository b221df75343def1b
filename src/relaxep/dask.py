r"""Sparse EP beyond one machine: ``DaskGPClassifier`` on Dask arrays whose row chunks stay on the workers.

Following the conventions of LightGBM's and XGBoost's Dask estimators: ``client=None`` uses
the default client (``distributed.default_client()``); ``fit`` takes Dask arrays (numpy is
accepted and scattered), ``predict_proba`` returns a Dask array for a Dask array.

The posterior is the FITC posterior of :mod:`relaxep.posterior.sparse` with the parallel
schedule of :class:`~relaxep.schedules.Parallel`, reorganised so that nothing of size
:math:`n` leaves a worker.  Each shard (one row chunk) holds its inputs, labels,
:math:`V_s^\top = K_{s,u}L_{uu}^{-\top}`, :math:`g_s`, its sites and its last proposals.  One
sweep is

1. **map** (broadcast :math:`L_B^{-1}` and :math:`m`, :math:`O(M^2)`): the shard's marginals
   :math:`\mu_i = (v_i^\top m + g_i\nu_i)/d_i`, :math:`A_{ii} = g_i/d_i + \|L_B^{-1}v_i\|^2/d_i^2`,
   the convergence statistic against its previous marginals, cavities, the rule's proposals,
   and scalars (largest change, counts of improper cavities, the inner products of the
   damping rule, the shard's terms of the EP evidence);
2. **map** (broadcast the step :math:`s`): the candidate sites
   :math:`\tau + s(\tau^* - \tau)` and their natural-parameter sums
   :math:`\sum_i w_i v_iv_i^\top` (:math:`M \times M`), :math:`\sum_i\beta_i v_i` (:math:`M`),
   :math:`\sum_i\log d_i`;
3. **reduce** on the client: :math:`B = I + \sum_s C_s`, its Cholesky factor and
   :math:`m = B^{-1}b` (an improper :math:`B` halves the step and repeats 2).

So the traffic per sweep is :math:`O(M^2)` per shard, never :math:`O(n)`, and the iterates
are those of ``GPClassifier(..., inducing_points=..., schedule="parallel")`` with the same
site rule (summation order aside): the fit equals the single-process one.  Learning the
kernel and the inducing inputs either runs on the client on ``optimizer_subset`` rows drawn
from the cluster (the single-process code on the same rows), or, with
``optimizer_subset=None``, on all shards: each evaluation of the evidence rebuilds the shards'
prior rows (a map), runs EP on them (warm-started from the last converged sites, as
``GPClassifier`` does) and maps the gradient (:mod:`relaxep.inference.sparse_evidence`; back
come :math:`M \times M`, :math:`M \times d` and scalars per shard).

Pointing it at an existing cluster::

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    clf = DaskGPClassifier(client=client, inducing_points=200).fit(X, y)  # X, y: dask arrays
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel
from sklearn.utils.validation import check_is_fitted, check_random_state

from relaxep._typing import Array
from relaxep._validation import check_positive_int, check_positive_number
from relaxep.errors import DivergenceError, KernelNotPositiveDefiniteError
from relaxep.estimators._inducing import check_inducing_points, flat, initial_inducing_points, split_parameters
from relaxep.estimators._models import _BinaryModel, _SparsePriors
from relaxep.estimators._search import _EvidenceSearch, scored, warn_unconverged
from relaxep.inference.sparse_evidence import (
    SparseKernel,
    as_sparse_kernel,
    finish_gradient,
    gradient_broadcast,
    shard_gradient,
)
from relaxep.likelihoods import Likelihood, NoisyProbit
from relaxep.posterior.base import cavity, is_proper
from relaxep.posterior.sparse import _cholesky_kuu, factor_b, natural_sums, shard_marginals, solve_rows
from relaxep.sites import EP, SiteRule, propose_sites

__all__ = ["DaskGPClassifier"]


# ------------------------------------------------------------------ the shards' work
def _shard_data(X: Array, y: Array, classes: Array) -> dict:
    """A shard's inputs and labels in -1/+1, flat sites, no warm start."""
    n = X.shape[0]
    labels = np.where(np.asarray(y) == classes[1], 1.0, -1.0)
    return {"X": np.asarray(X, dtype=float), "y": labels, "tau": np.zeros(n), "nu": np.zeros(n), "warm": None}


def _shard_prior(state: dict, Z: Array, kernel: Kernel, L_uu: Array, noise: float) -> dict:
    """The shard's rows of the FITC prior: V_s^T = K_{s,u} L_uu^-T and g_s (SparsePrior's, row for row)."""
    state = dict(state)
    X = state["X"]
    Vt = solve_rows(L_uu, np.asarray(kernel(X, Z), dtype=float))
    state["Vt"] = Vt
    state["g"] = np.maximum(np.asarray(kernel.diag(X), dtype=float) + noise - np.einsum("ij,ij->i", Vt, Vt), 0.0)
    return state


def _shard_start(state: dict, warm: bool) -> dict:
    """Sites for a new run: the kept (warm) ones or flat; the schedule's and monitor's memory cleared."""
    state = dict(state)
    n = state["y"].size
    if warm and state["warm"] is not None:
        state["tau"], state["nu"] = state["warm"][0].copy(), state["warm"][1].copy()
    else:
        state["tau"], state["nu"] = np.zeros(n), np.zeros(n)
    state.update(last=None, prev=None, prop=None)
    return state


def _shard_keep(state: dict) -> dict:
    """Remember the current sites as the next run's warm start (GPClassifier's ``_warm``)."""
    state = dict(state)
    state["warm"] = (state["tau"].copy(), state["nu"].copy())
    return state


def _shard_gradient(state: dict, kern: SparseKernel, Z: Array, pieces: dict) -> tuple:
    """The shard's share of the evidence gradient (:func:`relaxep.inference.sparse_evidence.shard_gradient`)."""
    return shard_gradient(
        kern, state["Vt"], state["g"], state["tau"], state["nu"], state["X"], Z, pieces, state["prev"][1]
    )


def _shard_sums(state: dict, step: float | None) -> tuple[dict, tuple[Array, Array, float, float]]:
    """Candidate sites at ``step`` (``None``: the sites as they are) and their natural-parameter sums."""
    state = dict(state)
    tau, nu = state["tau"], state["nu"]
    if step is not None and state.get("prop") is not None:
        idx, p_tau, p_nu = state["prop"]
        tau, nu = tau.copy(), nu.copy()
        tau[idx] = state["tau"][idx] + step * (p_tau - state["tau"][idx])
        nu[idx] = state["nu"][idx] + step * (p_nu - state["nu"][idx])
    state["cand"] = (tau, nu)
    return state, natural_sums(state["Vt"], state["g"], tau, nu)


def _shard_accept(state: dict) -> dict:
    state = dict(state)
    state["tau"], state["nu"] = state.pop("cand")
    return state


def _shard_sweep(
    state: dict, chol_inv: Array, m: Array, rule: SiteRule, likelihood: Likelihood, propose: bool
) -> tuple[dict, dict]:
    """Marginals from the broadcast factor, the convergence statistic, cavities, proposals and scalars."""
    state = dict(state)
    Vt, g, tau, nu, y = state["Vt"], state["g"], state["tau"], state["nu"], state["y"]
    mu, a = shard_marginals(Vt, g, tau, nu, chol_inv, m)
    out: dict[str, Any] = {"bad": bool(not np.all(a > 0.0) or not np.all(np.isfinite(mu))), "stat": 0.0}
    if state["prev"] is not None:
        mu0, a0 = state["prev"]
        with np.errstate(invalid="ignore", divide="ignore"):
            stat = max(float(np.max(np.abs(mu - mu0) / np.sqrt(a))), float(np.max(np.abs(np.log(a / a0)))))
        out["stat"] = stat if np.isfinite(stat) else float("inf")
    state["prev"] = (mu, a)
    fraction = float(rule.cavity_fraction)
    cav_mean, cav_var = cavity(mu, a, tau, nu, fraction)
    ok = is_proper(cav_var)
    out["n_improper"] = int(np.count_nonzero(~ok))
    # the EP evidence's terms (relaxep.inference.evidence.log_evidence), from the full cavities
    h, lam = cavity(mu, a, tau, nu, 1.0)
    if np.all(is_proper(lam)):
        log_zhat = likelihood.log_z(y * h, lam).log_z
        out["evidence"] = float(
            np.sum(log_zhat + 0.5 * np.log1p(lam * tau) + 0.5 * (h**2 / lam - mu**2 / a)) + 0.5 * float(nu @ mu)
        )
    else:
        out["evidence"] = float("nan")
    if not propose:
        return state, out
    idx = np.flatnonzero(ok)
    prop = propose_sites(rule, likelihood, y[idx], cav_mean[idx], cav_var[idx], tau[idx], nu[idx], a[idx])
    p_tau = np.asarray(prop.precision, dtype=float)
    p_nu = np.asarray(prop.mean_precision, dtype=float)
    finite = np.isfinite(p_tau) & np.isfinite(p_nu)
    out["n_nonfinite"] = int(np.count_nonzero(~finite))
    idx, p_tau, p_nu = idx[finite], p_tau[finite], p_nu[finite]
    state["prop"] = (idx, p_tau, p_nu)
    n = tau.size
    direction = np.zeros(2 * n)  # the damping rule's direction (schedules.Parallel._damp_if_reversed)
    direction[idx] = (p_tau - tau[idx]) * a[idx]
    direction[n + idx] = (p_nu - nu[idx]) * np.sqrt(a[idx])
    last = state["last"]
    out["dot"] = None if last is None else float(direction @ last)
    out["last_sq"] = None if last is None else float(last @ last)
    out["dir_sq"] = float(direction @ direction)
    state["last"] = direction
    return state, out


def _shard_sites(state: dict) -> tuple[Array, Array]:
    return state["tau"], state["nu"]


def _first(pair: tuple) -> Any:
    return pair[0]


def _second(pair: tuple) -> Any:
    return pair[1]


def _label(p1: Array, classes: Array) -> Array:
    return classes[(p1 >= 0.5).astype(int)]


def _predict_block(
    X: Array, kernel: Kernel, Z: Array, L_uu: Array, chol_inv: Array, m: Array, noise: float, likelihood: Likelihood
) -> Array:
    a = solve_rows(L_uu, np.asarray(kernel(X, Z), dtype=float))
    r = a @ chol_inv.T
    mean = a @ m
    var = np.maximum(kernel.diag(X) + noise - np.einsum("ij,ij->i", a, a) + np.einsum("ij,ij->i", r, r), 0.0)
    return np.clip(likelihood.predict(mean, np.maximum(var, 1e-300)), 0.0, 1.0)


# ------------------------------------------------------------------ the sharded posterior
class _ShardedFITC:
    """The FITC posterior over shards held on the workers; runs parallel EP as SiteUpdates + Parallel do.

    ``infer`` reproduces :meth:`GPClassifier._infer`: a warm start from the last converged
    sites (flat where they make the new posterior improper), a rerun from flat sites where the
    warm run diverges, and the converged sites kept for the next run.
    """

    def __init__(
        self, client: Any, X: Any, y: Any, classes: Array, noise: float, rule: SiteRule, likelihood: Likelihood,
        max_sweeps: int, tol: float, min_step: float,
    ) -> None:  # fmt: skip
        self.client, self.noise, self.rule, self.likelihood = client, noise, rule, likelihood
        self.max_sweeps, self.tol, self.min_step = max_sweeps, tol, min_step
        x_futs = client.compute(X.to_delayed().ravel().tolist())
        y_futs = client.compute(y.to_delayed().ravel().tolist())
        self.states = [
            client.submit(_shard_data, xf, yf, classes, pure=False) for xf, yf in zip(x_futs, y_futs, strict=True)
        ]
        self.has_warm = False

    def _map(self, fn: Any, *args: Any) -> list:
        return [self.client.submit(fn, st, *args, pure=False) for st in self.states]

    def _split(self, pairs: list) -> list:
        self.states = [self.client.submit(_first, p, pure=False) for p in pairs]
        return self.client.gather([self.client.submit(_second, p, pure=False) for p in pairs])

    def set_prior(self, kernel: Kernel, Z: Array) -> None:
        """Rebuild the shards' prior rows for ``kernel`` and ``Z`` (raises KernelNotPositiveDefiniteError)."""
        k_uu = np.asarray(kernel(Z, Z), dtype=float)
        k_uu[np.diag_indices_from(k_uu)] += 1e-6 * float(np.mean(np.diagonal(k_uu)))  # SparsePrior's jitter
        self.K_uu = 0.5 * (k_uu + k_uu.T)
        self.L_uu = _cholesky_kuu(self.K_uu)
        self.kernel, self.Z = kernel, Z
        self.states = self._map(_shard_prior, Z, kernel, self.L_uu, self.noise)

    def _sums(self, step: float | None) -> tuple | None:
        parts = self._split(self._map(_shard_sums, step))
        gram, b = sum(p[0] for p in parts), sum(p[1] for p in parts)
        if not all(p[3] > 0.0 for p in parts):
            return None
        try:
            chol, chol_inv, m = factor_b(gram, b)
        except ArithmeticError:
            return None
        return chol, chol_inv, m, sum(p[2] for p in parts) + 2.0 * float(np.sum(np.log(np.diagonal(chol))))

    def infer(self) -> dict:
        """One run as ``GPClassifier._infer`` does it (warm start, fallback, keep)."""
        warm = self.has_warm
        run = self._run(warm)
        if run["status"] == "diverged" and warm:
            run = self._run(False)
        if run["status"] == "converged":
            self.states = self._map(_shard_keep)
            self.has_warm = True
        return run

    def _run(self, warm: bool) -> dict:
        self.states = self._map(_shard_start, warm)
        factor = self._sums(None)
        if factor is None:
            if not warm:
                return {"status": "diverged"}
            return self._run(False)  # the warm sites do not fit this prior: start afresh
        self.states = self._map(_shard_accept)
        size, reversals, trace, status, last_skipped, sweep = 1.0, 0, [], "max_sweeps", 0, 0
        while True:
            propose = sweep < self.max_sweeps
            summary = self._split(self._map(_shard_sweep, factor[1], factor[2], self.rule, self.likelihood, propose))
            if any(s["bad"] for s in summary):
                if sweep == 0 and warm:
                    return self._run(False)  # (a refresh of the warm sites would have failed)
                status = "diverged"
                break
            n_improper = sum(s["n_improper"] for s in summary)
            if sweep:  # the statistic of the posterior after the last sweep (ConvergenceMonitor's "marginals")
                trace.append(max(s["stat"] for s in summary))
                if trace[-1] < self.tol and last_skipped == 0 and n_improper == 0:
                    status = "converged"
                    break
            if not propose:
                break
            bounced = False
            if summary[0]["dot"] is not None:
                dot = sum(s["dot"] for s in summary)
                norms = np.sqrt(sum(s["dir_sq"] for s in summary)) * np.sqrt(sum(s["last_sq"] for s in summary))
                bounced = dot < -0.5 * norms
            reversals = reversals + 1 if bounced else 0
            if reversals >= 2 and size / 2 >= self.min_step:
                size /= 2
            while True:
                candidate = self._sums(size)
                if candidate is not None or size / 2 < self.min_step:
                    break
                size /= 2
            if candidate is None:
                status = "diverged"
                break
            factor = candidate
            self.states = self._map(_shard_accept)
            last_skipped = n_improper + sum(s["n_nonfinite"] for s in summary)
            sweep += 1
        chol, chol_inv, m, log_det = factor
        evidence = float(sum(s["evidence"] for s in summary) - 0.5 * log_det)
        return {"status": status, "trace": trace, "chol": chol, "chol_inv": chol_inv, "m": m, "log_evidence": evidence}

    def gradient(self, kern: SparseKernel, run: dict) -> tuple[Array, Array]:
        """The evidence gradient in theta and Z: one map (M x M, M x d and scalars back) and a reduce."""
        pieces = gradient_broadcast(self.L_uu, run["chol"], run["m"])
        parts = self.client.gather(self._map(_shard_gradient, kern, self.Z, pieces))
        return finish_gradient(kern, parts, self.Z, self.K_uu, self.L_uu, pieces)

    def sites(self) -> tuple[Array, Array]:
        sites = self.client.gather(self._map(_shard_sites))
        return np.concatenate([t for t, _ in sites]), np.concatenate([v for _, v in sites])


# ------------------------------------------------------------------ the estimator
class DaskGPClassifier(ClassifierMixin, BaseEstimator):
    r"""Sparse (FITC) EP, Power EP or Relaxed EP classification on a Dask cluster (module docstring).

    Parameters
    ----------
    client : distributed.Client or None
        ``None``: ``distributed.default_client()``.
    kernel, likelihood, jitter, max_sweeps, tol, random_state
        As :class:`~relaxep.GPClassifier`.
    rule : SiteRule, default ``EP()``
        A site rule (``EP()``, ``PowerEP(u)``, ``RelaxedEP(c)``, ``FractionalEP(f)``), run with the
        parallel schedule; ``"auto"`` and inference methods are single-process only.
    inducing_points : int or array of shape (M, d), default 200
    learn_inducing_points, inducing_init, optimizer, optimizer_maxiter
        As :class:`~relaxep.GPClassifier`.
    optimizer_subset : int or None, default 20000
        Rows gathered from the cluster to learn the kernel and inducing inputs on (the
        evidence optimisation runs on the client); ``None``: learn on all shards (module
        docstring).  ``optimizer=None`` skips learning.

    Attributes
    ----------
    classes_, kernel_, inducing_points_, log_marginal_likelihood_value_
    status_ : str
        ``"converged"``, ``"max_sweeps"`` or ``"diverged"`` (raised as :class:`~relaxep.DivergenceError`).
    n_sweeps_ : int
    site_precision_, site_mean_precision_ : ndarray
        Gathered from the shards (only with ``fit(..., gather_sites=True)``).
    """

    def __init__(
        self,
        client: Any = None,
        kernel: Kernel | None = None,
        likelihood: Likelihood | None = None,
        rule: SiteRule | None = None,
        inducing_points: int | ArrayLike = 200,
        learn_inducing_points: bool = True,
        inducing_init: str = "kmeans",
        optimizer: str | None = "fmin_l_bfgs_b",
        optimizer_subset: int = 20_000,
        optimizer_maxiter: int | None = None,
        max_sweeps: int = 200,
        tol: float = 1e-4,
        jitter: float = 1e-6,
        min_step: float = 1.0 / 1024,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.client = client
        self.kernel = kernel
        self.likelihood = likelihood
        self.rule = rule
        self.inducing_points = inducing_points
        self.learn_inducing_points = learn_inducing_points
        self.inducing_init = inducing_init
        self.optimizer = optimizer
        self.optimizer_subset = optimizer_subset
        self.optimizer_maxiter = optimizer_maxiter
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.min_step = min_step
        self.random_state = random_state

    def _client(self) -> Any:
        if self.client is not None:
            return self.client
        from distributed import default_client

        return default_client()

    def fit(self, X: Any, y: Any, gather_sites: bool = False) -> DaskGPClassifier:
        """Fit on Dask arrays ``X`` (n x d, chunked by rows only) and ``y`` (n,); numpy arrays are scattered."""
        import dask.array as da

        client = self._client()
        rule = EP() if self.rule is None else self.rule
        if not isinstance(rule, SiteRule):
            raise TypeError(f"rule must be a SiteRule (the parallel schedule runs it), got {rule!r}")
        likelihood = NoisyProbit(0.01, 1.0) if self.likelihood is None else self.likelihood
        if not isinstance(likelihood, Likelihood):
            raise TypeError(f"likelihood must be a relaxep Likelihood, got {likelihood!r}")
        max_sweeps = check_positive_int(self.max_sweeps, "max_sweeps")
        tol = check_positive_number(self.tol, "tol")
        X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X, dtype=float), chunks=(10_000, -1))
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=X.chunks[0])
        if X.ndim != 2 or len(X.chunks[1]) != 1:
            raise ValueError(f"X must be 2-d and chunked along rows only, got chunks {X.chunks}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        X = X.astype(float)
        y = y.rechunk(X.chunks[0])
        classes = np.unique(da.unique(y).compute())
        if classes.size != 2:
            raise ValueError(f"DaskGPClassifier needs labels of exactly two classes, got {classes.size}")
        self.classes_ = classes
        n, d = X.shape
        spec = check_inducing_points(self.inducing_points, d)
        rng = check_random_state(self.random_state)
        self.kernel_ = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        Z = initial_inducing_points(_Rows(X), spec, self.inducing_init, rng)
        shards = _ShardedFITC(
            client, X, y, classes, float(self.jitter), rule, likelihood, max_sweeps, tol, float(self.min_step)
        )
        search = _EvidenceSearch(self.optimizer, 0, self.optimizer_maxiter)  # restarts, -inf policy, optimiser
        learn_z = bool(self.learn_inducing_points)
        if self.optimizer is not None and (self.kernel_.n_dims > 0 or learn_z):
            as_sparse_kernel(self.kernel_, d)  # refuses, before any work, a kernel it has no gradient for
            if self.optimizer_subset is not None and self.optimizer_subset < n:
                # the single-process model on rows gathered from the cluster, drawn as GPClassifier draws them
                idx = np.sort(rng.choice(n, int(self.optimizer_subset), replace=False))
                X_sub, y_sub = np.asarray(X[idx]), np.asarray(y[idx])
                model = _BinaryModel(
                    _SparsePriors(self.jitter), self.kernel_, likelihood, rule, search,
                    max_sweeps=self.max_sweeps, tol=self.tol, Z=Z, learn_z=learn_z,
                )  # fmt: skip
                model.learn(X_sub, np.where(y_sub == classes[1], 1.0, -1.0), rng)
                Z = model.Z
            else:
                Z = self._learn_on_shards(shards, search, Z, learn_z, d, rng)
        self.inducing_points_ = np.array(Z)
        shards.set_prior(self.kernel_, self.inducing_points_)
        run = shards.infer()
        if run["status"] == "diverged":
            raise DivergenceError(f"{rule!r} diverged on the shards; try damping or RelaxedEP")
        self.status_, self.n_sweeps_, self.trace_ = run["status"], len(run["trace"]), np.asarray(run["trace"])
        self.log_marginal_likelihood_value_ = run["log_evidence"]
        self._L_uu, self._chol_inv, self._m, self._likelihood = shards.L_uu, run["chol_inv"], run["m"], likelihood
        if gather_sites:
            self.site_precision_, self.site_mean_precision_ = shards.sites()
        if run["status"] != "converged":
            warn_unconverged(run["status"], self.n_sweeps_, run["trace"])
        return self

    def _learn_on_shards(
        self, shards: _ShardedFITC, search: _EvidenceSearch, Z0: Array, learn_z: bool, d: int, rng: Any
    ) -> Array:
        """Maximise the sparse EP evidence over all shards (the search of ``GPClassifier``'s sparse model, each
        evaluation rebuilding the shards' prior, running EP on them and mapping the gradient); sets
        ``kernel_.theta`` and returns the inducing inputs."""
        split = split_parameters(self.kernel_, Z0.shape, learn_z)

        def evidence(x: Array, eval_gradient: bool) -> tuple[float, Any]:
            theta, Z = split(x)
            kernel = self.kernel_.clone_with_theta(theta)
            try:
                shards.set_prior(kernel, Z0 if Z is None else Z)
            except KernelNotPositiveDefiniteError:
                return -np.inf, (np.zeros_like(x) if eval_gradient else None)
            run = shards.infer()  # warm-started on the shards, with a cold retry

            def gradient() -> Array:
                g_theta, g_z = shards.gradient(as_sparse_kernel(kernel, d), run)
                return flat(g_theta, g_z if learn_z else None)

            return scored(run["status"], run.get("log_evidence", np.nan), gradient if eval_gradient else None, x)

        best = search.maximise(
            evidence,
            self.kernel_.theta,
            self.kernel_.bounds,
            rng,
            pack=lambda theta0: flat(theta0, Z0 if learn_z else None),
            n_extra=Z0.size if learn_z else 0,
        )
        if best is None:
            return Z0
        theta, Z = split(best)
        self.kernel_.theta = theta
        return Z0 if Z is None else np.array(Z)

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (columns in ``classes_`` order); a Dask array for a Dask array."""
        import dask.array as da

        check_is_fitted(self, "_chol_inv")
        args = (self.kernel_, self.inducing_points_, self._L_uu, self._chol_inv, self._m, float(self.jitter))
        if isinstance(X, da.Array):
            block = partial(_predict_block, kernel=args[0], Z=args[1], L_uu=args[2], chol_inv=args[3], m=args[4])
            p1 = X.astype(float).map_blocks(block, noise=args[5], likelihood=self._likelihood, drop_axis=1, dtype=float)
            return da.stack([1.0 - p1, p1], axis=1)
        p1 = _predict_block(np.asarray(X, dtype=float), *args, self._likelihood)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> Any:
        """``classes_[1]`` where ``predict_proba[:, 1] >= 0.5``."""
        p = self.predict_proba(X)[:, 1]
        import dask.array as da

        if isinstance(p, da.Array):
            return p.map_blocks(_label, classes=self.classes_, dtype=self.classes_.dtype)
        return self.classes_[(p >= 0.5).astype(int)]


class _Rows:
    """What :func:`initial_inducing_points` needs of a Dask array: ``shape`` and rows by index, as numpy."""

    def __init__(self, X: Any) -> None:
        self._X = X
        self.shape = X.shape

    def __getitem__(self, index: Array) -> Array:
        order = np.argsort(index)
        rows = np.asarray(self._X[np.asarray(index)[order]])
        out = np.empty_like(rows)
        out[order] = rows
        return out
