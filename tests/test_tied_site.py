"""The stochastic search's tied site (:mod:`relaxep.inference.tied_site`), one class in every array namespace.

Ground truth: the dense Gaussian :math:`N(0, I)\\,t^k` computed with numpy's inverse and log-determinant,
:math:`P = I + k\\Lambda`, :math:`S = P^{-1}`, :math:`m = S k\\eta`, :math:`g = \\tfrac12 h^\\top P^{-1} h -
\\tfrac12\\log|P|`; and the damped step's rule, :math:`(1-\\epsilon)\\Lambda + \\epsilon\\bar\\Lambda` with
:math:`\\epsilon` halved until :math:`I + n\\Lambda` is positive definite, worked by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import relaxep._xp as rxp
from relaxep._xp import to_numpy
from relaxep.inference.tied_site import TiedSites, read_scalars

M, N = 5, 40


def _space(library):
    if library == "numpy":
        return rxp.HOST
    xs = pytest.importorskip("array_api_strict")
    pytest.importorskip("array_api_compat")
    return rxp.namespace(xs.asarray(np.zeros(1), device=xs.Device("device1")))


def _sites(space, lam, eta):
    sites = TiedSites.zero(M, N, space)
    sites.lam, sites.eta = space.put(lam), space.put(eta)
    return sites


@pytest.mark.parametrize("library", ["numpy", "array_api_strict"])
def test_the_tied_sites_gaussian_is_the_dense_one(dispatch, library):
    rng = np.random.default_rng(0)
    B = rng.normal(size=(M, M))
    lam, eta = B @ B.T / M, rng.normal(size=M)
    space = _space(library)
    sites = _sites(space, lam, eta)
    for copies in (N - 1.0, float(N)):
        S, m, g, ok = sites.gaussian(copies)
        P = np.eye(M) + copies * lam
        h = copies * eta
        want_S = np.linalg.inv(P)
        want_g = 0.5 * h @ want_S @ h - 0.5 * np.linalg.slogdet(P)[1]
        assert read_scalars(space, [ok]) == [1.0]
        np.testing.assert_allclose(to_numpy(S), want_S, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(to_numpy(m), want_S @ h, rtol=1e-10, atol=1e-14)
        assert read_scalars(space, [g])[0] == pytest.approx(want_g, rel=1e-12)
    # an improper precision: no Gaussian, a false flag
    sites.lam = space.put(-lam - np.eye(M))
    assert read_scalars(space, [sites.gaussian(float(N))[3]]) == [0.0]


@pytest.mark.parametrize("library", ["numpy", "array_api_strict"])
def test_the_damped_step_halves_until_q_stays_proper(dispatch, library):
    space = _space(library)
    sites = _sites(space, np.zeros((M, M)), np.zeros(M))
    b, eps = 4, 0.5
    # a minibatch mean with one negative direction: -3/n along e_0, so that I + n Lambda needs eps <= 1/3
    lam_sum = np.diag([-3.0 * b / N] + [1.0] * (M - 1))
    eta_sum = np.ones(M)
    taken = sites.move_towards(space.put(lam_sum), space.put(eta_sum), b, eps)
    assert taken == 0.25  # I + n Lambda's first entry 1 - 3 eps: -0.5 at eps = 0.5, 0.25 once halved
    np.testing.assert_allclose(to_numpy(sites.lam), 0.25 * lam_sum / b, rtol=1e-15)
    np.testing.assert_allclose(to_numpy(sites.eta), 0.25 * eta_sum / b, rtol=1e-15)
    assert read_scalars(space, [sites.log_partition_q()])[0] == pytest.approx(
        0.5 * (N * 0.25 / b) ** 2 * np.sum(1.0 / np.diag(np.eye(M) + N * 0.25 * lam_sum / b))
        - 0.5 * np.sum(np.log(np.diag(np.eye(M) + N * 0.25 * lam_sum / b))),
        rel=1e-12,
    )
    # nothing proper within the halvings: no step
    before = to_numpy(sites.lam).copy()
    assert sites.move_towards(space.put(-1e6 * np.eye(M)), space.put(eta_sum), 1, 1.0, halvings=3) == 0.0
    np.testing.assert_array_equal(to_numpy(sites.lam), before)
