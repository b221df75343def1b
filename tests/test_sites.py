"""Site-update rules against their definitions: moment matching, the REP objective, limits."""

import numpy as np
import pytest

from oracles import gaussian_kl_quad, lik_fn, tilted_quad
from problems import wavy_problem
from relaxep import EP, FractionalEP, Logistic, NoisyStep, PowerEP, Probit, RelaxedEP, infer
from relaxep.sites import Cavity, Site, paper_relaxed_objective, relaxed_objective

CASES = [
    # cavity mean, cavity var, site precision, site mean, marginal var A_ii
    (-1.5, 1.0, 0.4, 0.8, 0.7),
    (0.5, 2.0, 0.1, 1.5, 1.6),
    (-3.0, 0.5, 1.0, 2.0, 0.3),
    (2.0, 4.0, -0.05, -1.0, 4.5),
]


def _cavity_times_site(mean, var, tau, nu):
    prec = 1.0 / var + tau
    return (mean / var + nu) / prec, 1.0 / prec


@pytest.mark.parametrize("lik", [NoisyStep(0.2), Probit(), Logistic()], ids=repr)
@pytest.mark.parametrize("case", CASES)
def test_ep_site_times_cavity_is_the_tilted_distribution(lik, case):
    mean, var = case[:2]
    name = {"NoisyStep": "step", "Probit": "probit", "Logistic": "logistic"}[type(lik).__name__]
    _, t_mean, t_var = tilted_quad(lik_fn(name, getattr(lik, "eps", 0.0)), mean, var)
    prop = EP().update(lik, 1.0, Cavity(mean, var), Site(0.0, 0.0, var))
    m, v = _cavity_times_site(mean, var, prop.precision, prop.mean_precision)
    assert m == pytest.approx(t_mean, rel=1e-8)
    assert v == pytest.approx(t_var, rel=1e-8)


@pytest.mark.parametrize("case", CASES)
def test_power_ep_site_is_the_powered_site_with_variance_times_u(case):
    """Appendix C: moment-match t^u at the full cavity, then v <- u v (same site mean)."""
    mean, var = case[:2]
    u, lik = 0.6, NoisyStep(0.2)
    _, t_mean, t_var = tilted_quad(lik_fn("step", 0.2), mean, var, power=u)
    tau_u = 1.0 / t_var - 1.0 / var
    nu_u = t_mean / t_var - mean / var
    prop = PowerEP(u).update(lik, 1.0, Cavity(mean, var), Site(0.0, 0.0, var))
    assert prop.precision == pytest.approx(tau_u / u, rel=1e-7)
    assert prop.mean_precision / prop.precision == pytest.approx(nu_u / tau_u, rel=1e-7)


@pytest.mark.parametrize("lik", [NoisyStep(0.2), Probit()], ids=repr)
@pytest.mark.parametrize("case", CASES)
def test_power_ep_with_u_one_and_rep_with_huge_c_are_ep(lik, case):
    cavity, site = Cavity(*case[:2]), Site(case[2], case[2] * case[3], case[4])
    ep = EP().update(lik, 1.0, cavity, site)
    for rule in (PowerEP(1.0), RelaxedEP(c=1e8), FractionalEP(1.0)):
        other = rule.update(lik, 1.0, cavity, site)
        assert other.precision == ep.precision
        assert other.mean_precision == ep.mean_precision
        assert other.relaxation == 0.0


def _relaxed(t, b, site_mean):
    """``g -> t(g) exp(-b (g - m_i)^2 / 2)``: times the cavity, REP's relaxed tilted distribution (label 1)."""
    return lambda g: t(g) * np.exp(-0.5 * b * (np.asarray(g) - site_mean) ** 2)


@pytest.mark.parametrize("lik", [NoisyStep(0.2), NoisyStep(0.0), Probit(), Logistic()], ids=repr)
@pytest.mark.parametrize("b", [0.0, 0.3, 2.0, 15.0])
@pytest.mark.parametrize("case", CASES[:3])
def test_relaxed_kl_equals_quadrature_kl(lik, b, case):
    """Q(b) - c b is KL(p_b || proj p_b), p_b ∝ t r_b q_cavity, against direct 1-D quadrature of
    ``t r_b`` times the cavity itself (no relaxed cavity from relaxep)."""
    mean, var, _, site_mean, _ = case
    name = {"NoisyStep": "step", "Probit": "probit", "Logistic": "logistic"}[type(lik).__name__]
    t_r = _relaxed(lik_fn(name, getattr(lik, "eps", 0.0)), b, site_mean)
    _, pm, pv = tilted_quad(t_r, mean, var)
    expected = gaussian_kl_quad(t_r, mean, var, pm, pv)
    c = 0.7
    q = relaxed_objective(lik, 1.0, np.float64(b), mean, var, site_mean, c)
    assert q - c * b == pytest.approx(expected, rel=1e-8, abs=1e-10)


def test_scale_free_penalty_is_invariant_to_kernel_amplitude():
    """With the penalty c b lambda, scaling every variance by s^2 leaves the chosen b*lambda unchanged."""
    lik = NoisyStep(0.0)
    rule = RelaxedEP(c=0.05, penalty="scale_free")
    b1 = rule.optimal_relaxation(lik, 1.0, Cavity(-1.0, 1.0), Site(0.5, 0.5 * 0.8, 0.6))
    s2 = 9.0
    b2 = rule.optimal_relaxation(lik, 1.0, Cavity(-1.0 * 3, 1.0 * s2), Site(0.5 / s2, 0.5 / s2 * 0.8 * 3, 0.6 * s2))
    assert b1 > 0
    assert b2 * s2 == pytest.approx(b1, rel=1e-3)


def test_printed_objective_is_not_a_kl():
    """Appendix B's printed Q without the penalty goes negative: a KL cannot (docs/decisions.md)."""
    lik = NoisyStep(0.2)
    worst = np.inf
    for mean in np.linspace(-3, 3, 13):
        for var in (0.3, 1.0, 4.0):
            for site_mean in (-1.0, 0.5, 2.0):
                for b in (0.1, 1.0, 5.0):
                    val = paper_relaxed_objective(lik, 1.0, b, mean, var, site_mean, 0.5, var * 0.8, relax_weight=0.0)
                    worst = min(worst, float(val))
                    true_kl = relaxed_objective(lik, 1.0, np.float64(b), mean, var, site_mean, 0.0)
                    assert true_kl >= -1e-12
    assert worst < -0.05


@pytest.mark.parametrize("c", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("case", CASES)
def test_line_search_finds_the_global_minimum_on_a_dense_grid(c, case):
    mean, var, tau, site_mean, a_ii = case
    lik = NoisyStep(0.1)
    rule = RelaxedEP(c=c)
    b = rule.optimal_relaxation(lik, 1.0, Cavity(mean, var), Site(tau, tau * site_mean, a_ii))
    dense = np.concatenate([[0.0], np.logspace(-6, 6, 20001) / var])
    q_dense = relaxed_objective(lik, 1.0, dense, mean, var, site_mean, c)
    q_b = relaxed_objective(lik, 1.0, np.float64(b), mean, var, site_mean, c)
    assert b >= 0
    assert q_b <= q_dense.min() + 1e-9


def test_relaxation_is_used_somewhere_for_small_c():
    """A site whose cavity straddles the step is relaxed when c is small, less so as c grows."""
    cavity, site = Cavity(-1.0, 2.0), Site(0.5, 1.0, 1.0)  # site mean 2.0
    bs = [float(RelaxedEP(c=c).optimal_relaxation(NoisyStep(0.1), 1.0, cavity, site)) for c in (0.001, 0.01, 0.1, 10)]
    assert bs[0] > bs[1] > bs[2] > 0
    assert bs[3] == 0.0


def test_paper_variant_multiplies_the_relaxation_back():
    """The printed step (e): the site is ``proj[t r_b q_cavity] / (r_b q_cavity)`` (both Gaussians'
    moments by quadrature) times ``r_b``: ``tau_b + b``, ``nu_b + b m_i``."""
    lik = NoisyStep(0.1)
    rule = RelaxedEP(c=0.01, variant="paper")
    prop = rule.update(lik, 1.0, Cavity(-0.5, 1.0), Site(0.5, 0.5, 1.0 / 1.5))  # site mean 1.0
    b = float(prop.relaxation)
    assert b > 0.1  # (the earlier case, cavity (-3, 1), site mean 2, had b = 0: step (e) went unchecked)
    _, t_mean, t_var = tilted_quad(_relaxed(lik_fn("step", 0.1), b, 1.0), -0.5, 1.0)
    _, r_mean, r_var = tilted_quad(_relaxed(lambda g: np.ones_like(g), b, 1.0), -0.5, 1.0)
    tau_b, nu_b = 1.0 / t_var - 1.0 / r_var, t_mean / t_var - r_mean / r_var
    assert prop.precision == pytest.approx(tau_b + b, rel=1e-8)
    assert prop.mean_precision == pytest.approx(nu_b + b * 1.0, rel=1e-8)


def test_damping_interpolates_natural_parameters():
    lik = Probit()
    cavity, site = Cavity(0.3, 1.0), Site(0.2, 0.1, 0.8)
    full = EP().update(lik, 1.0, cavity, site)
    half = EP(damping=0.25).update(lik, 1.0, cavity, site)
    assert half.precision == pytest.approx(0.75 * 0.2 + 0.25 * full.precision)
    assert half.mean_precision == pytest.approx(0.75 * 0.1 + 0.25 * full.mean_precision)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: PowerEP(0.0), "power u"),
        (lambda: PowerEP(1.2), "power u"),
        (lambda: RelaxedEP(c=-1.0), "c must be >= 0"),
        (lambda: RelaxedEP(c=float("nan")), "c must be >= 0"),
        (lambda: RelaxedEP(variant="printed"), "variant"),
        (lambda: EP(damping=0.0), "damping"),
        (lambda: EP(damping=1.5), "damping"),
        (lambda: FractionalEP(0.0), "fraction"),
        (lambda: FractionalEP(1.5), "fraction"),
        (lambda: RelaxedEP(penalty="relative"), "penalty"),
    ],
)
def test_bad_rule_parameters_are_rejected(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("make", [lambda: EP(damping="0.5"), lambda: PowerEP(u=None), lambda: RelaxedEP(c="1")])
def test_rule_parameters_of_the_wrong_type_are_a_type_error(make):
    with pytest.raises(TypeError, match="must be a real number"):
        make()


def test_rule_params_round_trip():
    rule = RelaxedEP(c=3.0)
    assert rule.get_params()["c"] == 3.0
    rule.set_params(c=5.0)
    assert rule == RelaxedEP(c=5.0)
    with pytest.raises(ValueError, match="c must be"):
        rule.set_params(c=-2.0)


@pytest.mark.parametrize("schedule", ["blocked", "parallel"])
def test_fractional_ep_with_fraction_one_is_ep(schedule):
    K, y = wavy_problem(40, 0)
    a = infer(K, y, NoisyStep(0.1), EP(), schedule=schedule, tol=1e-9, max_sweeps=300)
    b = infer(K, y, NoisyStep(0.1), FractionalEP(1.0), schedule=schedule, tol=1e-9, max_sweeps=300)
    np.testing.assert_array_equal(a.site_precision, b.site_precision)
    np.testing.assert_array_equal(a.mean, b.mean)


@pytest.mark.parametrize(("lik", "name", "eps"), [(Probit(), "probit", 0.0), (NoisyStep(0.1), "step", 0.1)])
def test_fractional_ep_fixed_point_matches_the_fraction_tilted_moments(lik, name, eps):
    """At convergence every marginal equals the moments of t^a q^{\\a} (by adaptive quadrature)."""
    fraction = 0.5
    K, y = wavy_problem(20, 1)
    res = infer(K, y, lik, FractionalEP(fraction), tol=1e-12, max_sweeps=2000)
    assert res.converged
    var = np.diag(res.cov)
    cav_var = 1.0 / (1.0 / var - fraction * res.site_precision)
    cav_mean = cav_var * (res.mean / var - fraction * res.site_mean_precision)
    t = lik_fn(name, eps)
    for i in range(len(y)):
        _, m, v = tilted_quad(lambda g, i=i: t(y[i] * g), cav_mean[i], cav_var[i], power=fraction)[:3]
        assert m == pytest.approx(res.mean[i], abs=1e-7)
        assert v == pytest.approx(var[i], rel=1e-6)
