r"""Parallel EP on a FITC posterior whose rows are sharded over Dask workers (the engine of ``DaskGPClassifier``
and ``DaskGPRegressor``).

Each shard (one row chunk, :class:`~relaxep.inference.shards.Shard`) holds its inputs, targets, its rows of the
FITC prior, its sites and its last proposals, and runs the same row-block functions
(:mod:`relaxep.posterior.fitc_rows`) as the single-process sweep; :class:`ShardedFITC` maps the functions of
:mod:`relaxep.inference.shards` over them and reduces on the client.
The algorithm, sweep by sweep, is in :mod:`relaxep.estimators.dask`.

**The same answer on any cluster.**  Every reduction runs on the client over the shards' partial sums in
shard order (the row chunks' order), and each shard sums its rows in block order
(:func:`~relaxep._threads.fold_blocks`), so the floating-point result depends on the chunking only: one,
two or eight workers give the same sites to the last bit.  A map that does not answer within
``timeout`` seconds, or whose futures the cluster has cancelled (a restarted scheduler or cluster keeps
none of the shards' state), raises :class:`~relaxep.errors.ClusterError` instead of waiting for ever.
"""

from __future__ import annotations

import time
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from functools import reduce
from operator import add
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from relaxep._typing import Array
from relaxep._xp import HOST
from relaxep.errors import ClusterError
from relaxep.inference import shards
from relaxep.inference.ledger import RunOptions, SweepLedger
from relaxep.inference.schedules import AdaptiveStep
from relaxep.inference.warm import WarmStarts
from relaxep.likelihoods import Likelihood
from relaxep.posterior.fitc_rows import factor_b, inducing_factor, log_det_of
from relaxep.posterior.rbf import ScaledRBF
from relaxep.posterior.sparse_gradient import finish_gradient, gradient_broadcast
from relaxep.sites import SiteRule

__all__ = ["ShardedFITC", "ShardedResult", "gather_in_order"]


# ------------------------------------------------------------------ reductions on the client
def _total(values: Any) -> float | None:
    """The sum over the shards, ``None`` where the shards have none (the first sweep's inner products)."""
    values = list(values)
    return None if values[0] is None else sum(values)


def _in_shard_order(parts: Any) -> Any:
    """The shards' partial sums added one after another in shard order: the floating-point result depends on
    the chunking alone, never on the workers (module docstring)."""
    return reduce(add, parts)


def _on_shard(fn: Any, state: Any, *args: Any) -> Any:
    """``fn(state, *args)`` for a shard's state, or for the ``(state, out)`` pair of the last map (the state
    stays on its worker; only ``out`` is gathered, by :func:`_second`)."""
    return fn(state[0] if isinstance(state, tuple) else state, *args)


def _second(pair: tuple) -> Any:
    return pair[1]


@dataclass(frozen=True)
class ShardedResult:
    r"""The outcome of one run of parallel EP over the shards (:meth:`ShardedFITC.infer`).

    Attributes
    ----------
    status : {"converged", "max_sweeps", "diverged"}
    trace : ndarray
        The convergence statistic after each sweep (the largest over the shards).
    n_sweeps : int
        ``len(trace)``, as :class:`~relaxep.inference.InferenceResult` counts them.
    log_evidence : float
        The EP log evidence at the fixed point; ``nan`` unless the run converged (away from a fixed
        point EP's formula is not an evidence; as :attr:`InferenceResult.log_evidence
        <relaxep.InferenceResult.log_evidence>`).
    chol, chol_inv, m : ndarray or None
        :math:`L_B` (the Cholesky factor of :math:`B = I + \sum_s C_s`), :math:`L_B^{-1}` and the inducing
        mean :math:`m = B^{-1}b`, all ``M x M`` or ``M``; ``None`` where the run diverged.
    """

    status: str
    trace: Array
    log_evidence: float
    chol: Array | None = field(default=None, repr=False)
    chol_inv: Array | None = field(default=None, repr=False)
    m: Array | None = field(default=None, repr=False)

    @property
    def converged(self) -> bool:
        """``status == "converged"``."""
        return self.status == "converged"

    @property
    def n_sweeps(self) -> int:
        return len(self.trace)

    @classmethod
    def diverged(cls, trace: Any = ()) -> ShardedResult:
        """A diverged run: its trace so far, no evidence and no factor."""
        trace = np.asarray(trace, dtype=float)
        return cls("diverged", trace, float("nan"))


def gather_in_order(client: Any, futures: list, timeout: float | None) -> list:
    """The futures' results in shard order, within ``timeout`` seconds; a cancelled future (the cluster
    restarted: the shards' state is gone) or a timeout raise :class:`~relaxep.errors.ClusterError`."""
    from distributed import wait

    try:
        wait(futures, timeout=timeout)
        return client.gather(futures)
    except CancelledError as exc:
        raise ClusterError(
            "the cluster lost the shards' state: their futures were cancelled (a scheduler or cluster restart, "
            "or a client that reconnected to a new scheduler keeps none of it); nothing of this fit is left on "
            "the cluster: fit again"
        ) from exc
    except TimeoutError as exc:
        raise ClusterError(
            f"the cluster did not answer one map over the shards within timeout={timeout} s (a scheduler "
            "down or restarting, or no workers left); check the cluster and fit again, or raise timeout for "
            "maps that take longer"
        ) from exc


# ------------------------------------------------------------------ the sharded posterior
class ShardedFITC:
    """The FITC posterior over shards held on the workers; runs parallel EP as SiteUpdates + Parallel do.

    :meth:`infer` runs under the warm-start policy of every model (:class:`~relaxep.inference.warm.WarmStarts`:
    warm, cold where the warm run diverged, keep where it converged; flat sites where the warm ones make
    the new posterior improper); the kept sites stay on the shards, the policy holds only that they exist.
    """

    def __init__(
        self, client: Any, X: Any, y: Any, noise: float, rule: SiteRule, likelihood: Likelihood, max_sweeps: int,
        tol: float, min_step: float, timeout: float | None = None,
    ) -> None:  # fmt: skip
        self.client, self.noise, self.rule, self.likelihood = client, noise, rule, likelihood
        self.max_sweeps, self.tol, self.min_step, self.timeout = max_sweeps, tol, min_step, timeout
        x_futs = client.compute(X.to_delayed().ravel().tolist())
        y_futs = client.compute(y.to_delayed().ravel().tolist())
        self.states = [client.submit(shards.new, xf, yf, pure=False) for xf, yf in zip(x_futs, y_futs, strict=True)]
        self.warm = WarmStarts(keep=self._keep_on_shards)
        self.shard_rows: list[int] | None = None  # the shards' row counts (feature_scale)
        self._feature_scale: tuple[int, Array] | None = None  # (rows, the features' sds): the rows are fixed
        self.rounds: list[tuple[float, float]] | None = None  # (start, end) of each gather, where a list is set
        self.stall_window: int | None = None  # a search's runs: "abandoned" after so many sweeps without progress

    def _map(self, fn: Any, *args: Any) -> list:
        return [self.client.submit(_on_shard, fn, st, *args, pure=False) for st in self.states]

    def _gather(self, futures: list) -> list:
        """The futures' results in shard order (:func:`gather_in_order`), each gather's time kept in ``rounds``."""
        start = time.time()
        out = gather_in_order(self.client, futures, self.timeout)
        if self.rounds is not None:
            self.rounds.append((start, time.time()))
        return out

    def submit(self, fn: Any, *args: Any) -> list:
        """``fn(shard, *args)`` on every shard, its results left on the workers: their futures in shard order (what
        outlives the shards, as the leave-one-out rows; :func:`gather_in_order` brings them back)."""
        return self._map(fn, *args)

    def _split(self, pairs: list) -> list:
        """Keep the ``(state, out)`` pairs as the shards' states and gather the ``out`` parts."""
        self.states = pairs
        return self._gather([self.client.submit(_second, p, pure=False) for p in pairs])

    def set_prior(self, kernel: Kernel, Z: Array) -> None:
        """Rebuild the shards' prior rows for ``kernel`` and ``Z`` (raises KernelNotPositiveDefiniteError)."""
        self.K_uu, self.L_uu, _ = inducing_factor(kernel, Z)  # SparsePrior's K_uu, jitter and factor
        self.kernel, self.Z = kernel, Z
        self.states = self._map(shards.prior, Z, kernel, self.L_uu, self.noise)

    def _sums(self, step: float | None) -> tuple | None:
        """The candidate sites at ``step`` on every shard and the factor of their posterior (:meth:`_factor`)."""
        return self._factor(self._split(self._map(shards.sums, step)))

    @staticmethod
    def _factor(parts: list) -> tuple | None:
        r""":math:`B = I + \sum_s C_s`, its factors and :math:`m` from the shards' sums in shard order; ``None``
        where the candidate posterior is improper."""
        gram, b = _in_shard_order(p[0] for p in parts), _in_shard_order(p[1] for p in parts)
        if not all(p[3] > 0.0 for p in parts):
            return None
        try:
            chol, chol_inv, m = factor_b(HOST, gram, b)
        except ArithmeticError:
            return None
        return chol, chol_inv, m, sum(p[2] for p in parts) + log_det_of(HOST, chol)

    def infer(self) -> ShardedResult:
        """One run of parallel EP over the shards under the warm-start policy (class docstring)."""
        return self.warm.run(self._run)

    def _keep_on_shards(self, result: ShardedResult) -> bool:
        """Keep the converged sites on the shards as the next run's start (what the policy keeps: that they do)."""
        self.states = self._map(shards.keep)
        return True

    def _run(self, *, init: bool | None) -> ShardedResult:
        """Parallel EP over the shards: ``SiteUpdates`` with ``Parallel``, its sweep mapped over the shards;
        ``init``: start from the sites kept on the shards (else flat)."""
        warm = bool(init)
        self.states = self._map(shards.start, warm)
        factor = self._sums(None)
        if factor is None:
            if not warm:
                return ShardedResult.diverged()
            return self._run(init=None)  # the warm sites do not fit this prior: start afresh
        step = AdaptiveStep(1.0, self.min_step)
        options = RunOptions(max_sweeps=self.max_sweeps, tol=self.tol, stall_window=self.stall_window)
        ledger = SweepLedger(options)  # the stop rules and Parallel's coarse rule (a sweep loop's, one place)
        last_skipped, sweep = 0, 0
        while True:
            propose = sweep < self.max_sweeps
            ahead = step.size if propose else None  # (the candidate's sums at the current step, on the way)
            sweep_map = self._map(shards.sweep, factor[1], factor[2], self.rule, self.likelihood, propose, ahead)
            summary = self._split(sweep_map)
            if any(s["bad"] for s in summary):
                if sweep == 0 and warm:
                    return self._run(init=None)  # (a refresh of the warm sites would have failed)
                ledger.diverge(record=False)
                break
            n_improper = sum(s["n_improper"] for s in summary)
            if sweep:  # the statistic of the posterior after the last sweep (the largest over the shards)
                moved = max(s["stat"] for s in summary)
                coarse = ledger.coarse  # (a sweep whose refresh may be single precision in one process ends no run)
                ledger.next_coarse(moved)
                if ledger.sweep(moved, last_skipped, step.size, coarse=coarse, proper=n_improper == 0):
                    break
            if not propose:
                break
            step.observe(*(_total(s[key] for s in summary) for key in ("dot", "dir_sq", "last_sq")))
            same = step.size == ahead
            candidate = self._factor([s["sums"] for s in summary]) if same else self._sums(step.size)
            while candidate is None and step.halve():
                candidate = self._sums(step.size)
            if candidate is None:
                ledger.diverge(record=False)
                break
            factor = candidate  # (its sites become the shards' sites at the next sweep's start)
            last_skipped = n_improper + sum(s["n_nonfinite"] for s in summary)
            sweep += 1
        if ledger.status == "diverged":
            return ShardedResult.diverged(ledger.trace)
        chol, chol_inv, m, log_det = factor
        # EP's evidence formula is an evidence at a fixed point only (InferenceResult.log_evidence)
        converged = ledger.status == "converged"
        evidence = float(sum(s["evidence"] for s in summary) - 0.5 * log_det) if converged else np.nan
        trace = np.asarray(ledger.trace, dtype=float)
        return ShardedResult(ledger.status, trace, evidence, chol, chol_inv, m)

    def gradient(self, kern: ScaledRBF, run: ShardedResult) -> tuple[Array, Array]:
        """The evidence gradient in theta and Z: one map (M x M, M x d and scalars back) and a reduce."""
        pieces = gradient_broadcast(self.L_uu, run.chol, run.m)
        parts = self._gather(self._map(shards.gradient, kern, self.Z, pieces))
        return finish_gradient(kern, parts, self.Z, self.K_uu, self.L_uu, pieces)

    def likelihood_gradient(self) -> Array:
        """The evidence gradient in the likelihood's hyperparameters after :meth:`infer`: one map (``p`` numbers
        back per shard), summed in shard order."""
        if self.likelihood.n_dims == 0:
            return np.zeros(0)
        return np.asarray(_in_shard_order(self._gather(self._map(shards.likelihood_gradient, self.likelihood))))

    # ------------------------------------------------------------ the stochastic search
    def feature_scale(self) -> tuple[int, Array]:
        """Rows and the features' standard deviations (one map, ``d`` numbers back per shard, the first call; the
        rows do not change, so later calls reuse its answer)."""
        if self._feature_scale is None:
            parts = self._gather(self._map(shards.stats))
            self.shard_rows = [p[0] for p in parts]
            n = sum(self.shard_rows)
            mean = sum(p[1] for p in parts) / n
            self._feature_scale = (n, np.sqrt(np.maximum(sum(p[2] for p in parts) / n - mean**2, 0.0)))
        return self._feature_scale

    def minibatches(self, batch_size: int, rng: np.random.Generator) -> Any:
        """The stochastic search's ``evaluate``: each step one map, every shard drawing its share of
        ``batch_size`` rows (in proportion to its rows) and sending back ``M x M`` sums
        (:class:`~relaxep.inference.stochastic_ep.MinibatchSums`)."""
        if self.shard_rows is None:
            self.feature_scale()
        sizes = self.shard_rows
        n = sum(sizes)
        shares = [max(1, round(batch_size * size / n)) for size in sizes]

        def evaluate(step: Any) -> Any:
            seeds = rng.integers(2**63 - 1, size=len(self.states))
            shared = self.client.scatter(step, broadcast=True, hash=False)  # once a worker, not once a shard
            futures = [
                self.client.submit(shards.minibatch, st, shared, rows, int(seed), pure=False)
                for st, rows, seed in zip(self.states, shares, seeds, strict=True)
            ]
            return _in_shard_order(self._gather(futures))

        return evaluate

    def start_from_tied(self, step: Any) -> None:
        """Every shard's warm start from the learned tied site (the next :meth:`infer` starts there)."""
        self.states = self._map(shards.tied_start, step)
        self.warm.reset(True)

    def sites(self) -> tuple[Array, Array]:
        sites = self._gather(self._map(shards.sites))
        return np.concatenate([t for t, _ in sites]), np.concatenate([v for _, v in sites])
