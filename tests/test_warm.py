"""Warm starts: the sites a run starts from are a value (Sites), carried between runs by one policy (WarmStarts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF

from relaxep import EP, Probit, infer
from relaxep.inference.warm import Sites, WarmStarts


def _problem(n: int = 40):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return 4.0 * RBF(1.0)(X) + 1e-6 * np.eye(n), y


def test_a_run_started_at_a_fixed_points_sites_stays_there():
    K, y = _problem()
    first = infer(K, y, Probit(), EP(), schedule="sequential", tol=1e-10, max_sweeps=500)
    again = infer(K, y, Probit(), EP(), schedule="sequential", tol=1e-10, init=first.sites)
    assert first.converged and again.converged
    assert again.n_sweeps <= 2  # one sweep moves nothing, the next confirms it
    np.testing.assert_allclose(again.site_precision, first.site_precision, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(again.mean, first.mean, rtol=1e-8, atol=1e-12)
    # a result and its sites are the same start
    from_result = infer(K, y, Probit(), EP(), schedule="sequential", tol=1e-10, init=first)
    np.testing.assert_array_equal(from_result.site_precision, again.site_precision)


def test_sites_are_frozen_copies_and_refuse_mismatched_shapes():
    tau, nu = np.ones(3), np.arange(3.0)
    sites = Sites(tau, nu)
    tau[0] = 7.0  # the caller's array is not shared
    assert sites.site_precision[0] == 1.0
    np.testing.assert_array_equal(sites.relaxation, np.zeros(3))
    with pytest.raises(ValueError, match=r"writable|read-only"):
        sites.site_precision[0] = 2.0
    with pytest.raises(ValueError, match="site_mean_precision"):
        Sites(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="relaxation"):
        Sites(np.ones(3), np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="init"):
        K, y = _problem(5)
        infer(K, y, Probit(), EP(), init=(np.ones(5), np.ones(5)))


@dataclass
class _Run:
    status: str
    sites: object


def test_warm_then_cold_where_the_warm_run_diverged_and_keep_what_converged():
    calls = []

    def run(outcome, *, init):
        calls.append(init)
        return _Run(outcome(init), sites=("sites of", len(calls)))

    warm = WarmStarts()
    warm.run(run, lambda init: "converged")  # cold: nothing kept yet
    assert calls == [None] and warm.start == ("sites of", 1)
    warm.run(run, lambda init: "diverged" if init is not None else "max_sweeps")
    assert calls[1:] == [("sites of", 1), None]  # warm, then cold
    assert warm.start == ("sites of", 1)  # neither run converged: the start is kept
    with warm.held():
        warm.run(run, lambda init: "converged")
    assert warm.start == ("sites of", 1)  # held: runs inside leave it as it was
    warm.reset()
    warm.run(run, lambda init: "converged")
    assert calls[-1] is None
    off = WarmStarts(enabled=False)
    off.reset(("given",))
    off.run(run, lambda init: "converged")
    assert calls[-1] is None and off.start == ("given",)
