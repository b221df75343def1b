"""Convergent EP (descent on the EC free energy): it reaches EP's fixed points where EP oscillates,
checked against adaptive quadrature, and its free energy never rises."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import lik_fn, tilted_quad
from problems import wavy_problem
from relaxep import EP, ConvergentEP, DoubleLoopEP, NoisyProbit, NoisyStep, Probit, infer
from relaxep.inference.free_energy import moment_free_energy, r_cavities
from test_double_loop import _fixed_point_error


@pytest.mark.parametrize(
    ("lik", "t"),
    [
        (NoisyStep(0.1), lik_fn("step", 0.1)),
        (Probit(), lik_fn("probit")),
        (NoisyProbit(0.05, 0.5), lik_fn("noisy-probit", 0.05, 0.5)),
    ],
    ids=["step", "probit", "noisy-probit"],
)
def test_r_cavities_have_the_target_tilted_moments(lik, t):
    """Targets made by quadrature from known cavities: the solver finds cavities whose tilted
    moments (by quadrature again) are the targets."""
    cavities = [(-1.0, 2.0), (0.5, 0.7), (2.0, 4.0), (-3.0, 1.0)]
    targets = np.array([tilted_quad(t, m, v)[1:] for m, v in cavities])
    r = r_cavities(lik, np.ones(len(targets)), targets[:, 0], targets[:, 1])
    assert r.ok and np.all(r.precision > 0)
    for (m_want, v_want), h, c in zip(targets, r.precision_mean, r.precision, strict=True):
        _, m, v = tilted_quad(t, h / c, 1.0 / c)
        assert m == pytest.approx(m_want, abs=1e-8 * np.sqrt(v_want))
        assert v == pytest.approx(v_want, rel=1e-8)
    np.testing.assert_allclose(r.precision, [1.0 / v for _, v in cavities], rtol=1e-6)


def test_r_cavities_in_blocks_on_threads_reach_the_target_moments(monkeypatch):
    """The sites solved in blocks (R_BLOCK, each block's Newton run on a thread): every block's r-cavities have
    the target tilted moments (by quadrature), and a site's answer does not depend on the blocks it fell in."""
    import relaxep.inference.free_energy as free_energy

    t = lik_fn("noisy-probit", 0.05, 0.5)
    rng = np.random.default_rng(3)
    cavities = np.column_stack([rng.normal(0.0, 2.0, 12), rng.uniform(0.3, 4.0, 12)])
    targets = np.array([tilted_quad(t, m, v)[1:] for m, v in cavities])
    lik, y = NoisyProbit(0.05, 0.5), np.ones(len(targets))
    whole = r_cavities(lik, y, targets[:, 0], targets[:, 1])
    monkeypatch.setattr(free_energy, "R_BLOCK", 5)  # 3 blocks of 4, on the machine's threads
    blocked = r_cavities(lik, y, targets[:, 0], targets[:, 1])
    assert blocked.ok
    for (m_want, v_want), h, c in zip(targets, blocked.precision_mean, blocked.precision, strict=True):
        _, m, v = tilted_quad(t, h / c, 1.0 / c)
        assert m == pytest.approx(m_want, abs=1e-8 * np.sqrt(v_want))
        assert v == pytest.approx(v_want, rel=1e-8)
    np.testing.assert_allclose(blocked.precision, whole.precision, rtol=1e-12)
    np.testing.assert_allclose(blocked.conjugate, whole.conjugate, rtol=1e-12)


# the hardness suite's problem 4 (6-7 s) runs with the slow studies; the oscillating one by default
@pytest.mark.parametrize("problem", ["oscillating", pytest.param("suite-4", marks=pytest.mark.slow)])
def test_converges_to_an_ep_fixed_point_where_ep_does_not(problem, oscillating, hard_suite_problem):
    if problem == "oscillating":
        K, y, eps = oscillating
        lik = NoisyStep(eps)
    else:
        K, y, lik = hard_suite_problem
    assert not infer(K, y, lik, EP(), schedule="parallel", max_sweeps=200).converged
    phi: list[float] = []

    def record(sweep, post):
        r = r_cavities(lik, y, post.mean, post.marginal_var)
        log_det = float(post.site_mean_precision @ post.mean) - 2.0 * post.log_partition()
        phi.append(
            moment_free_energy(post.alpha, post.mean, post.site_precision, post.marginal_var, log_det, r.conjugate)
        )

    # (1e-6: below that the free energy's own rounding hides the descent and the run would stall)
    res = infer(K, y, lik, ConvergentEP(), tol=1e-6, max_sweeps=500, callback=record)
    assert res.converged
    assert _fixed_point_error(res, y, "step", lik.eps) < 1e-5
    assert np.all(np.diff(phi) <= 1e-9 * np.abs(phi[:-1]))  # the free energy never rises
    assert phi[-1] == pytest.approx(-res.log_evidence, rel=1e-7)  # Phi = -log Z_EP at the fixed point
    dl = infer(K, y, lik, DoubleLoopEP(), tol=1e-8)
    assert dl.log_evidence == pytest.approx(res.log_evidence, rel=1e-8)


@pytest.mark.parametrize("lik", [NoisyStep(0.1), Probit(), NoisyProbit(0.05)], ids=repr)
def test_same_fixed_point_as_ep_where_ep_converges(lik):
    K, y = wavy_problem(40, 0)
    ep = infer(K, y, lik, EP(), tol=1e-10, max_sweeps=500)
    cep = infer(K, y, lik, ConvergentEP(), tol=1e-7, max_sweeps=500)
    assert ep.converged and cep.converged
    np.testing.assert_allclose(cep.mean, ep.mean, atol=1e-5)
    np.testing.assert_allclose(cep.marginal_var, ep.marginal_var, rtol=1e-5)
    assert cep.log_evidence == pytest.approx(ep.log_evidence, rel=1e-9)


def test_plain_descent_without_mixing_also_converges(oscillating):
    """``memory=0`` (no Anderson mixing) also ends at an EP fixed point: every marginal is its tilted
    moments by quadrature (1e-5 at tol 1e-6, as the mixing run above)."""
    K, y, eps = oscillating
    res = infer(K, y, NoisyStep(eps), ConvergentEP(memory=0), tol=1e-6, max_sweeps=1000)
    assert res.converged
    assert _fixed_point_error(res, y, "step", eps) < 1e-5


def test_bad_parameters_and_likelihoods_are_refused():
    with pytest.raises(ValueError, match="memory"):
        ConvergentEP(memory=-1)
    with pytest.raises(ValueError, match="max_newton"):
        ConvergentEP(max_newton=0)
    from test_double_loop import _NoCumulants

    with pytest.raises(TypeError, match="tilted cumulants"):
        infer(np.eye(2), np.array([1.0, -1.0]), _NoCumulants(), ConvergentEP())
