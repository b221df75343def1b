"""Independent ground truth for the tests: adaptive 1-D quadrature and exact integrals.

Nothing here imports relaxep's numerics; the tests compare relaxep against these.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
from scipy import integrate, stats
from scipy.special import expit, ndtr

RTOL = 1e-8  # quadrature-level agreement for closed forms
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def normal_pdf(x, mean: float = 0.0, sd: float = 1.0):
    """The normal density written out: quad calls its integrands point by point, where ``scipy.stats`` costs some
    50 microseconds a call."""
    return np.exp(-0.5 * ((x - mean) / sd) ** 2 - _LOG_SQRT_2PI) / sd


def quad(f, lo: float, hi: float, **kw) -> float:
    """``scipy.integrate.quad``'s value, where quad's only notice may be the roundoff one.

    The oracles ask for 1e-12 to 1e-13 relative accuracy, at or beyond what quad can confirm from its
    panel sums, so its "roundoff error is detected" notice is expected and ignored here, and only
    here (the suite has no global filter).  Any other notice (the subdivision limit reached, a
    divergent or badly behaved integrand) means the oracle is unsure: it raises ``ArithmeticError``
    instead of handing the test a doubtful reference.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", integrate.IntegrationWarning)
        value = integrate.quad(f, lo, hi, **kw)[0]
    for w in caught:
        if not issubclass(w.category, integrate.IntegrationWarning):
            warnings.warn(w.message, w.category, stacklevel=2)
        elif "roundoff" not in str(w.message):
            raise ArithmeticError(f"quadrature oracle unsure on [{lo:.6g}, {hi:.6g}]: {w.message}")
    return value


def lik_fn(name: str, eps: float = 0.0, scale: float = 1.0):
    """``t(g)`` as a plain function of the folded latent, by likelihood name."""
    if name == "step":
        return lambda g: eps + (1.0 - 2.0 * eps) * (np.asarray(g) >= 0)
    if name == "probit":
        return ndtr
    if name == "noisy-probit":
        return lambda g: eps + (1.0 - 2.0 * eps) * ndtr(np.asarray(g) / scale)
    if name == "logistic":
        return expit
    # regression likelihoods p(y = 1 | g): eps is the noise variance / the degrees of freedom
    # (written out: quad calls them point by point, and scipy.stats is slow per call)
    if name == "gaussian":
        return lambda g: np.exp(-0.5 * (1.0 - g) ** 2 / eps) / np.sqrt(2 * np.pi * eps)
    if name == "student-t":
        const = math.lgamma((eps + 1) / 2) - math.lgamma(eps / 2) - 0.5 * math.log(eps * math.pi) - math.log(scale)
        return lambda g: np.exp(const - 0.5 * (eps + 1) * np.log1p(((1.0 - g) / scale) ** 2 / eps))
    if name == "laplace":
        return lambda g: np.exp(-np.abs(1.0 - g) / scale) / (2 * scale)
    raise KeyError(name)


def tilted_quad(t, mean: float, var: float, power: float = 1.0, extra=None):
    """``log Z``, tilted mean and variance (and ``E[extra(g)]``) by adaptive quadrature.

    The integrand is evaluated relative to its value at a well-placed centre so that
    tiny normalisers (cavities far in the tails) keep full relative precision.
    """
    sd = np.sqrt(var)
    grid = np.linspace(mean - 40 * sd, mean + 40 * sd, 20001)
    with np.errstate(divide="ignore"):
        logp = power * np.log(np.maximum(t(grid), 0.0)) + stats.norm.logpdf(grid, mean, sd)
    centre = grid[np.argmax(logp)]
    ref = logp.max()
    lo, hi = grid[0], grid[-1]
    pts = sorted({centre, 0.0} if lo < 0 < hi else {centre})

    # (quad calls f point by point: the normal's log density written out, no scipy.stats or errstate per call)
    log_norm = -math.log(sd) - _LOG_SQRT_2PI - ref

    def f(g, k):
        tg = float(t(g))
        if not tg > 0.0:
            return 0.0
        lp = power * math.log(tg) - 0.5 * ((g - mean) / sd) ** 2 + log_norm
        return math.exp(lp) * (g - centre) ** k if lp > -745.2 else 0.0

    kw = dict(points=pts, epsabs=0.0, epsrel=1e-13, limit=2000)
    z0 = quad(f, lo, hi, args=(0,), **kw)
    m1 = quad(f, lo, hi, args=(1,), **kw) / z0
    m2 = quad(f, lo, hi, args=(2,), **kw) / z0
    out = [np.log(z0) + ref, centre + m1, m2 - m1**2]
    if extra is not None:

        def fe(g):
            weight = f(g, 0)
            return weight * extra(g) if weight > 0 else 0.0

        out.append(quad(fe, lo, hi, **kw) / z0)
    return tuple(out)


def gaussian_kl_quad(t, mean: float, var: float, proj_mean: float, proj_var: float) -> float:
    """KL(p || N(proj_mean, proj_var)) for ``p ∝ t(g) N(g | mean, var)`` by quadrature."""
    log_z = tilted_quad(t, mean, var)[0]
    sd = np.sqrt(var)

    def integrand(g):
        tg = float(t(g))
        if tg <= 0.0:
            return 0.0
        logp = math.log(tg) - 0.5 * ((g - mean) / sd) ** 2 - math.log(sd) - _LOG_SQRT_2PI - log_z
        log_q = -0.5 * (g - proj_mean) ** 2 / proj_var - 0.5 * math.log(proj_var) - _LOG_SQRT_2PI
        return math.exp(logp) * (logp - log_q)

    lo, hi = mean - 40 * sd, mean + 40 * sd
    pts = [0.0] if lo < 0 < hi else None
    return quad(integrand, lo, hi, points=pts, epsabs=1e-14, epsrel=1e-12, limit=2000)


def exact_linear_step_posterior(X: np.ndarray, y: np.ndarray, eps: float):
    """Exact posterior of ``w`` for ``f = X w``, ``w ~ N(0, I_2)``, step likelihood with noise ``eps``.

    The likelihood depends on ``w`` only through its direction, so in polar
    coordinates it is piecewise constant in the angle with breaks where
    ``x_i . u(theta) = 0``; the radial integrals are closed form
    (``int r e^{-r^2/2} = 1``, ``int r^2 e^{-r^2/2} = sqrt(pi/2)``, ``int r^3 e^{-r^2/2} = 2``),
    and the angular ones are integrals of trigonometric polynomials over arcs.
    Returns ``(mean_w, cov_w, log Z)``.
    """
    angles = np.arctan2(X[:, 1], X[:, 0])
    breaks = np.sort(np.mod(np.concatenate([angles + np.pi / 2, angles - np.pi / 2]), 2 * np.pi))
    breaks = np.concatenate([breaks, [breaks[0] + 2 * np.pi]])
    z = 0.0
    m = np.zeros(2)
    s = np.zeros((2, 2))
    for a, b in itertools.pairwise(breaks):
        if b - a <= 0:
            continue
        mid = 0.5 * (a + b)
        u = np.array([np.cos(mid), np.sin(mid)])
        lik = np.prod(np.where(y * (X @ u) >= 0, 1.0 - eps, eps))
        d = b - a
        z += lik * d
        m += lik * np.array([np.sin(b) - np.sin(a), np.cos(a) - np.cos(b)])
        s2 = 0.25 * (np.sin(2 * b) - np.sin(2 * a))
        sc = 0.5 * (np.sin(b) ** 2 - np.sin(a) ** 2)
        s += lik * np.array([[d / 2 + s2, sc], [sc, d / 2 - s2]])
    z_norm = z / (2 * np.pi)
    mean = np.sqrt(np.pi / 2) * m / (2 * np.pi) / z_norm
    second = 2.0 * s / (2 * np.pi) / z_norm
    return mean, second - np.outer(mean, mean), np.log(z_norm)


def orthant_log_evidence(K: np.ndarray, y: np.ndarray, likelihood: str, eps: float = 0.0) -> float:
    """Exact ``log p(y)`` for probit or noisy-step likelihoods via Gaussian orthant probabilities.

    Probit: ``p(y) = P(y_i (f_i + e_i) > 0 for all i)``, ``e ~ N(0, I)``.
    Step: ``p(y) = sum_S eps^{n-|S|} (1-2 eps)^{|S|} P(y_i f_i > 0, i in S)``.
    """
    n = len(y)
    Y = np.diag(y)
    if likelihood == "probit":
        cov = Y @ (K + np.eye(n)) @ Y
        return float(np.log(_orthant(cov)))
    total = 0.0
    cov = Y @ K @ Y
    for r in range(n + 1):
        for subset in itertools.combinations(range(n), r):
            idx = list(subset)
            if not idx:
                prob = 1.0
            elif len(idx) == 1:
                prob = 0.5
            else:
                prob = _orthant(cov[np.ix_(idx, idx)])
            total += eps ** (n - r) * (1 - 2 * eps) ** r * prob
    return float(np.log(total))


def _orthant(cov: np.ndarray) -> float:
    """P(v <= 0) for v ~ N(0, cov), by scipy's Genz quadrature."""
    d = cov.shape[0]
    return float(stats.multivariate_normal.cdf(np.zeros(d), np.zeros(d), cov, maxpts=10**6, abseps=1e-10, releps=1e-10))


def regression_tilted_quad(log_lik, y: float, mean: float, var: float, power: float, width: float, extras=()):
    """``log Z``, mean, variance, third and fourth cumulants (and ``E[extra(f)]``) of
    ``p(y|f)^power N(f | mean, var)`` by ``scipy.integrate.quad``, for a likelihood of width ``width``
    peaked at ``y``; ``log_lik`` and the extras are scalar functions (plain ``math``: quad calls them
    point by point).

    The range covers ``mean +- 42 sd`` and ``y +- 42 width``; ``points`` are ``y``, ``mean`` and a
    geometric ladder around both (the tilted of a heavy-tailed likelihood lives on both scales); the
    integrand is taken relative to its largest value on a grid, so tiny normalisers keep their
    relative precision, and moments are of ``(f - c)`` about that grid's mode ``c``.
    """
    sd = math.sqrt(var)
    lo, hi = min(mean - 42 * sd, y - 42 * width), max(mean + 42 * sd, y + 42 * width)
    pts = {mean, y}
    for centre, w in ((y, width), (mean, sd)):
        for k in range(-2, 40, 3):
            pts.update((centre - w * 2.0**k, centre + w * 2.0**k))
    pts = sorted(p for p in pts if lo < p < hi)
    half_log_2pi_var = 0.5 * math.log(2 * math.pi * var)

    def log_integrand(f):
        return power * log_lik(f) - 0.5 * (f - mean) ** 2 / var - half_log_2pi_var

    grid = [*pts, *np.linspace(lo, hi, 2001)]
    values = [log_integrand(f) for f in grid]
    k_max = int(np.argmax(values))
    ref, centre = values[k_max], grid[k_max]

    def moment(k, extra=None):
        def f(x):
            w = math.exp(log_integrand(x) - ref)
            return w * (x - centre) ** k if extra is None else (w * extra(x) if w > 0 else 0.0)

        return quad(f, lo, hi, points=pts, epsabs=0.0, epsrel=1e-12, limit=4000)

    z = moment(0)
    m1, m2, m3, m4 = (moment(k) / z for k in range(1, 5))
    c2 = m2 - m1**2
    c3 = m3 - 3 * m1 * m2 + 2 * m1**3
    c4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4
    return {
        "log_z": math.log(z) + ref,
        "mean": centre + m1,
        "var": c2,
        "k3": c3,
        "k4": c4 - 3 * c2**2,
        "extras": [moment(0, e) / z for e in extras],
    }


def _checked_quad(f, lo: float, hi: float, points=None, rtol: float = 1e-10) -> float:
    """``quad`` to ``epsrel = 1e-12`` that raises when its own error estimate exceeds ``rtol`` (relative):
    an oracle that is unsure says so instead of relying on the suite's IntegrationWarning filter."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)  # decided by the error estimate below
        value, err = integrate.quad(f, lo, hi, points=points, epsabs=0.0, epsrel=1e-12, limit=2000)
    if not (np.isfinite(value) and err <= rtol * abs(value)):
        raise ArithmeticError(f"quad is unsure: {value!r} +- {err!r} on [{lo}, {hi}]")
    return value


def multinomial_probit_log_lik(f, y: int) -> float:
    """``log p(y | f)`` of the multinomial probit, ``p = P(f_y + e_y > f_j + e_j for all j != y)``,
    ``e ~ N(0, I)``: conditioning on ``e_y = u``, ``log int N(u) prod_{j != y} Phi(u + f_y - f_j) du``
    by adaptive quadrature, relative to the integrand's peak (log-concave, width <= 1) so that tiny
    probabilities keep their relative precision."""
    from scipy.special import log_ndtr

    f = np.asarray(f, dtype=float)
    d = np.array([f[y] - f[j] for j in range(f.size) if j != y])
    grid = np.linspace(-80.0, 80.0, 32001)
    log_g = -0.5 * grid**2 + log_ndtr(grid[:, None] + d[None, :]).sum(axis=1)
    top, centre = float(log_g.max()), float(grid[np.argmax(log_g)])

    def integrand(u):
        return math.exp(-0.5 * u * u + float(np.sum(log_ndtr(u + d))) - top)

    value = _checked_quad(integrand, centre - 40.0, centre + 40.0, points=[centre])
    return math.log(value) + top - 0.5 * math.log(2.0 * math.pi)


def orthant_truncated_moments(cov):
    """``P(h > 0)``, ``E[h | h > 0]`` and ``Cov[h | h > 0]`` for ``h ~ N(0, cov)`` in two dimensions.

    One-dimensional adaptive quadrature over ``h_1 > 0`` of the closed-form moments of
    ``h_2 1{h_2 > 0}`` given ``h_1`` (a Gaussian), i.e. ``E[X^k 1{X > 0}]`` for ``k = 0, 1, 2``.
    """
    cov = np.asarray(cov, dtype=float)
    s1 = math.sqrt(cov[0, 0])
    beta = cov[0, 1] / cov[0, 0]
    cond_sd = math.sqrt(cov[1, 1] - cov[0, 1] ** 2 / cov[0, 0])

    def part(h1, k):  # E[h2^k 1{h2 > 0} | h1]
        mu = beta * h1
        a = mu / cond_sd
        prob = 0.5 * math.erfc(-a / math.sqrt(2.0))
        dens = math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
        return (prob, mu * prob + cond_sd * dens, (mu * mu + cond_sd**2) * prob + mu * cond_sd * dens)[k]

    def moment(a, b):  # E[h1^a h2^b 1{h > 0}]
        def integrand(h1):
            return h1**a * math.exp(-0.5 * (h1 / s1) ** 2) / (s1 * math.sqrt(2.0 * math.pi)) * part(h1, b)

        return _checked_quad(integrand, 0.0, 40.0 * s1)

    p = moment(0, 0)
    mean = np.array([moment(1, 0), moment(0, 1)]) / p
    second = np.array([[moment(2, 0), moment(1, 1)], [moment(1, 1), moment(0, 2)]]) / p
    return p, mean, second - np.outer(mean, mean)


def one_point_multiclass_posterior(k: float, y: int, likelihood: str, eps: float = 0.0):
    """Exact posterior mean and covariance of ``f`` in R^3 for ONE point with prior ``N(0, k I_3)``.

    ``likelihood="probit"``: the multinomial probit; with ``s = f + e``, ``e ~ N(0, I)``, the label
    is the event ``h = B^T s > 0`` (``B = [e_y - e_j]_{j != y}``), so ``f | y`` is ``f`` given a
    Gaussian ``h`` truncated to the orthant, and its moments follow from ``h``'s
    (:func:`orthant_truncated_moments`) by the linear regression of ``f`` on ``h``.
    ``likelihood="robust-max"``: ``eps/2 + (1 - 3 eps/2) [argmax f = y]``, a mixture of the prior
    and the prior truncated to ``h = B^T f > 0``.  Returns ``(mean, cov, Z)``.
    """
    C = 3
    B = np.zeros((C, C - 1))
    for col, j in enumerate(j for j in range(C) if j != y):
        B[y, col], B[j, col] = 1.0, -1.0
    noise = 1.0 if likelihood == "probit" else 0.0
    var_h = (k + noise) * B.T @ B
    gain = k * B @ np.linalg.inv(var_h)  # Cov(f, h) Var(h)^-1
    p, mean_h, cov_h = orthant_truncated_moments(var_h)
    mean = gain @ mean_h
    cov = k * np.eye(C) - gain @ var_h @ gain.T + gain @ cov_h @ gain.T
    if likelihood == "probit":
        return mean, cov, p
    if likelihood != "robust-max":
        raise KeyError(likelihood)
    floor, kappa = eps / (C - 1), 1.0 - eps - eps / (C - 1)
    z = floor + kappa * p
    w = kappa * p / z
    second = (1.0 - w) * k * np.eye(C) + w * (cov + np.outer(mean, mean))
    mean = w * mean
    return mean, second - np.outer(mean, mean), z


# --- Relaxed EP: the relaxed tilted distribution, integrated as written (no relaxep numerics) ---


def log_t_fn(name: str, eps: float = 0.0, scale: float = 1.0):
    """``log t(g)`` of :func:`lik_fn`'s "step", "probit", "logistic" and "student-t" (``p(y = 1 | g)``,
    ``eps`` the degrees of freedom) for the relaxed oracles: a numpy function of arrays that takes the
    plain ``math`` path for a Python float (``quad`` calls it point by point)."""
    from scipy.special import log_ndtr

    if name == "step":
        low, high = (math.log(eps) if eps > 0 else -math.inf), math.log(1.0 - eps)

        def log_step(g):
            if isinstance(g, float):
                return high if g >= 0 else low
            return np.where(np.asarray(g) >= 0, high, low)

        return log_step
    if name == "probit":
        return lambda g: float(log_ndtr(g)) if isinstance(g, float) else log_ndtr(g)
    if name == "logistic":

        def log_logistic(g):
            if isinstance(g, float):
                return -(max(-g, 0.0) + math.log1p(math.exp(-abs(g))))
            return -np.logaddexp(0.0, -np.asarray(g))

        return log_logistic
    if name == "student-t":
        const = math.lgamma((eps + 1) / 2) - math.lgamma(eps / 2) - 0.5 * math.log(eps * math.pi) - math.log(scale)

        def log_student_t(g):
            if isinstance(g, float):
                return const - 0.5 * (eps + 1) * math.log1p(((1.0 - g) / scale) ** 2 / eps)
            return const - 0.5 * (eps + 1) * np.log1p(((1.0 - np.asarray(g)) / scale) ** 2 / eps)

        return log_student_t
    raise KeyError(name)


def _relaxed_log_weight(log_t, cavity_mean, cavity_var, centre, relaxation):
    """``f -> log[t(f) exp(-b (f - centre)^2 / 2) N(f | h, lam)] + log sqrt(2 pi lam)``, as written."""

    def log_w(f):
        return log_t(f) - 0.5 * relaxation * (f - centre) ** 2 - 0.5 * (f - cavity_mean) ** 2 / cavity_var

    return log_w


def relaxed_tilted_quad(log_t, cavity_mean, cavity_var, centre, relaxation, breaks=()):
    """Relaxed EP's tilted distribution ``p_b(f) ∝ t(f) exp(-b (f - centre)^2 / 2) N(f | h, lam)`` by
    adaptive quadrature of that product as written (``t`` given by ``log_t``, a function of ``f``).

    Returns ``(log Z_b, mean, var, KL(p_b || N(mean, var)), E[log t])``, ``Z_b`` the integral of the
    product; the KL is integrated directly, ``∫ p_b log(p_b / N)``.  ``breaks`` are jumps or kinks of
    ``t``.  The window is 40 cavity sd beyond the cavity mean and the centre; the integrand is taken
    relative to its largest value on a grid there, and ``quad`` gets a geometric ladder of points about
    that peak and every break, so narrow (large ``b``) or truncated far-tail tilteds keep full relative
    precision.  Raises ``ArithmeticError`` where ``quad``'s own error estimate exceeds 1e-10 (relative).
    """
    import warnings

    h, lam, m, b = float(cavity_mean), float(cavity_var), float(centre), float(relaxation)
    sd = math.sqrt(lam)
    lo, hi = min(h, m) - 40 * sd, max(h, m) + 40 * sd
    log_w = _relaxed_log_weight(log_t, h, lam, m, b)
    grid = np.linspace(lo, hi, 20001)
    values = log_w(grid)
    k = int(np.argmax(values))
    ref, c = float(values[k]), float(grid[k])
    ladder = sd * 8.0 ** np.arange(-8, 3)
    pts = sorted(q for p in {c, *map(float, breaks)} for q in (p, *(p - ladder), *(p + ladder)) if lo < q < hi)

    def w(f):
        lw = float(log_w(f)) - ref
        return math.exp(lw) if lw > -745.0 else 0.0

    def integral(fn, floor):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)  # decided by the error estimate
            value, err = integrate.quad(fn, lo, hi, points=pts, epsabs=0.0, epsrel=1e-12, limit=4000)
        if not (np.isfinite(value) and err <= 1e-10 * max(abs(value), floor)):
            raise ArithmeticError(f"quad is unsure: {value!r} +- {err!r}")
        return value

    z0 = integral(w, 0.0)
    c2 = integral(lambda f: w(f) * (f - c) ** 2, 0.0) / z0
    c1 = integral(lambda f: w(f) * (f - c), z0 * math.sqrt(c2)) / z0
    mean, var = c + c1, c2 - c1**2
    log_z0 = math.log(z0)

    def kl_integrand(f):
        wf = w(f)
        return wf * (float(log_w(f)) - ref - log_z0 + 0.5 * (f - mean) ** 2 / var) if wf > 0.0 else 0.0

    def log_t_integrand(f):
        wf = w(f)
        return wf * float(log_t(f)) if wf > 0.0 else 0.0

    kl = integral(kl_integrand, z0) / z0 + 0.5 * math.log(2 * math.pi * var)
    e_log_t = integral(log_t_integrand, z0) / z0
    return log_z0 + ref - 0.5 * math.log(2 * math.pi * lam), mean, var, kl, e_log_t


def relaxed_tilted_rule(log_t, cavity_mean, cavity_var, centre, relaxations, breaks=(), half_width=40, panel=1.0):
    """:func:`relaxed_tilted_quad`'s ``(log Z_b, mean, var, KL, E[log t])`` for many ``b`` at once (arrays)
    by a fixed composite 16-point Gauss-Legendre rule: fast enough for a dense search over ``b``.

    Per ``b`` the panels (``panel`` wide) tile ``mu_b +- half_width s_b``, ``(mu_b, s_b^2)`` the mode and
    variance of the Gaussian part ``exp(-b (f - centre)^2 / 2) N(f | h, lam)``, with extra edges at every
    break and a geometric ladder about it.  Where the nodes sit does not enter the integrand (the product
    as written); a misplaced window would lose mass, which the tests would see: they check this rule
    against :func:`relaxed_tilted_quad` where they use it.  Where the product underflows at every node
    (``t`` zero on the whole window) the row is ``nan``.
    """
    h, lam, m = float(cavity_mean), float(cavity_var), float(centre)
    b = np.atleast_1d(np.asarray(relaxations, dtype=float))[:, None]
    prec = 1.0 / lam + b
    s = 1.0 / np.sqrt(prec)
    mu = (h / lam + b * m) / prec
    uniform = np.tile(np.arange(-half_width, half_width + panel / 2, panel), (len(b), 1))
    ladder = np.concatenate([[0.0], -(2.0 ** -np.arange(1, 16)), 2.0 ** -np.arange(1, 16)])
    z_breaks = (np.asarray(breaks, dtype=float)[None, :, None] - mu[:, :, None]) / s[:, :, None] + ladder
    z_breaks = np.clip(z_breaks.reshape(len(b), -1), -half_width, half_width)
    edges = np.sort(np.concatenate([uniform, z_breaks], axis=1), axis=1)
    nodes, weights = np.polynomial.legendre.leggauss(16)
    left, width = edges[:, :-1, None], np.diff(edges, axis=1)[:, :, None]
    f = mu + s * (left + width * 0.5 * (nodes + 1.0)).reshape(len(b), -1)
    log_w = _relaxed_log_weight(log_t, h, lam, m, b)(f)
    ref = log_w.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.exp(log_w - ref) * (width * 0.5 * weights).reshape(len(b), -1) * s
        z0 = w.sum(axis=1, keepdims=True)
        p = w / z0
        mean = (p * f).sum(axis=1, keepdims=True)
        var = (p * (f - mean) ** 2).sum(axis=1, keepdims=True)
        log_p = np.where(w > 0, log_w - ref - np.log(z0), 0.0)
        kl = (p * (log_p + 0.5 * (f - mean) ** 2 / var)).sum(axis=1) + 0.5 * np.log(2 * np.pi * var[:, 0])
        e_log_t = np.where(w > 0, p * log_t(f), 0.0).sum(axis=1)
    log_z = np.log(z0[:, 0]) + ref[:, 0] - 0.5 * np.log(2 * np.pi * lam)
    return log_z, mean[:, 0], var[:, 0], kl, e_log_t


def positive_truncated_normal(mean: float, var: float):
    """``log P(g > 0)``, mean and variance of ``N(mean, var)`` truncated to ``g > 0``, for ``mean <= 0``.

    Far in the tail (``mean`` many sd below 0) the mass sits within ``var / |mean|`` of 0: the weights
    ``exp(-g^2 / (2 var) + g mean / var)`` (the density relative to its value at 0, expanded so that
    nothing cancels) are integrated by adaptive quadrature on that scale, and the moments are of ``g``
    itself, so nothing cancels either (unlike ``mean + sd * ratio`` or scipy's ``truncnorm`` there).
    """
    from scipy.special import log_ndtr

    if mean > 0:
        raise ValueError("for mean <= 0 (the tail); use tilted_quad otherwise")
    sd = math.sqrt(var)
    width = min(sd, var / abs(mean)) if mean < 0 else sd

    def moment(k):
        return _checked_quad(lambda g: g**k * math.exp(-0.5 * g * g / var + g * mean / var), 0.0, 60.0 * width)

    z0 = moment(0)
    m1 = moment(1) / z0
    return float(log_ndtr(mean / sd)), m1, moment(2) / z0 - m1**2
