"""Property tests over random small problems (hypothesis)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxep import EP, Logistic, NoisyStep, PowerEP, Probit, RelaxedEP, infer

STATUSES = {"converged", "max_sweeps", "diverged", "stuck"}  # no stall window, not the double loop


@st.composite
def problems(draw):
    n = draw(st.integers(2, 12))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, draw(st.integers(1, 3))))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[0], y[1] = 1.0, -1.0
    length = draw(st.floats(0.1, 5.0))
    amplitude = draw(st.floats(0.05, 50.0))
    jitter = draw(st.sampled_from([1e-8, 1e-6, 1e-2]))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = amplitude * np.exp(-0.5 * d2 / length**2) + jitter * amplitude * np.eye(n)
    lik = draw(
        st.sampled_from([NoisyStep(0.0), NoisyStep(0.05), NoisyStep(0.2), NoisyStep(0.45), Probit(), Logistic()])
    )
    rule = draw(
        st.sampled_from(
            [
                EP(),
                EP(damping=0.5),
                PowerEP(0.5),
                PowerEP(0.9),
                RelaxedEP(0.01),
                RelaxedEP(1.0),
                RelaxedEP(1.0, "paper"),
            ]
        )
    )
    if rule == RelaxedEP(1.0, "paper") and not isinstance(lik, NoisyStep):
        rule = RelaxedEP(1.0)
    schedule = draw(st.sampled_from(["blocked", "sequential", "parallel"]))
    return K, y, lik, rule, schedule


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_results_are_finite_and_the_posterior_is_a_covariance(problem):
    K, y, lik, rule, schedule = problem
    res = infer(K, y, lik, rule, schedule=schedule, max_sweeps=40)
    assert res.n_sweeps == len(res.trace) <= 40
    # each status says what the trace shows
    assert res.status in STATUSES
    assert (res.status == "max_sweeps") == (res.n_sweeps == 40 and res.status not in ("converged", "diverged", "stuck"))
    if res.status == "converged":
        assert res.trace[-1] < 1e-3 and res.skipped_per_sweep[-1] == 0
    if res.status == "diverged":
        assert np.isinf(res.trace[-1])
    if res.status == "stuck":
        assert res.skipped_per_sweep[-1] > 0 and np.all(res.trace[-5:] < 1e-3)
    assert np.all(np.isfinite(res.mean)) and np.all(np.isfinite(res.cov))
    np.testing.assert_array_equal(res.cov, res.cov.T)
    assert np.linalg.eigvalsh(res.cov).min() > -1e-10 * np.abs(res.cov).max()
    assert np.all(np.diag(res.cov) > 0)
    if res.converged:
        assert np.isfinite(res.log_evidence)
        assert np.all(np.isfinite(res.site_precision)) and np.all(np.isfinite(res.alpha))
        assert res.trace[-1] < 1e-3
    p = res.likelihood.predict(*res.predict_latent(K, np.diag(K)))
    assert np.all((p >= 0) & (p <= 1))
