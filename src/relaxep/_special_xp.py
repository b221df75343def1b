r""":math:`\operatorname{erfcx}` and :math:`\log\Phi` in any array library, from the array API standard alone.

The standard (2023.12) has no error function, so a library without its own ``erfcx`` or ``log_ndtr``
(``array-api-strict``; JAX for ``erfcx``) would otherwise answer them through SciPy on the host, one round trip
per call.  The functions here compute them on the arrays' own device with the standard's elementwise
operations only (``exp``, ``log``, ``log1p``, ``round``, ``abs``, ``where``, arithmetic), from the rational
minimax approximations of

    W. J. Cody, *Rational Chebyshev approximations for the error function*, Math. Comp. 23 (1969), 631-637,

with the coefficients as published there (the same that Cody's ``CALERF``, ACM TOMS Algorithm 715, 1993,
evaluates).  For :math:`a = |x|` and :math:`T = 0.46875`:

.. math::
    \operatorname{erf}(x) &\approx x\,\frac{\sum_{j=0}^{4} p_j x^{2j}}{\sum_{j=0}^{4} q_j x^{2j}},
        \quad |x| \le T \quad\text{(so } \operatorname{erfcx}(x) = e^{x^2}(1 - \operatorname{erf}(x))\text{)},\\
    \operatorname{erfcx}(a) &\approx \frac{\sum_{j=0}^{8} p_j a^{j}}{\sum_{j=0}^{8} q_j a^{j}},
        \quad T \le a \le 4,\\
    \operatorname{erfcx}(a) &\approx \frac1a\Bigl(\frac{1}{\sqrt\pi} - z\,\frac{\sum_{j=0}^{5} p_j z^{j}}
        {\sum_{j=0}^{5} q_j z^{j}}\Bigr),\quad z = a^{-2},\quad a \ge 4,

Cody's forms :math:`\operatorname{erfc}(x) = e^{-x^2} R_{8,8}(x)` and :math:`\operatorname{erfc}(x) =
\frac{e^{-x^2}}{x}(\pi^{-1/2} + x^{-2}R_{5,5}(x^{-2}))` multiplied by :math:`e^{x^2}` (the sign of the last
:math:`R` is written out).  Each is accurate to about 18 significant digits, beyond double precision.  Then

.. math::
    \operatorname{erfcx}(x) = 2e^{x^2} - \operatorname{erfcx}(-x),\quad x < -T,

(the subtraction costs at most a factor 1.7 in relative error, at :math:`x = -T`; infinite for
:math:`x < -26.63`, as SciPy), and, with :math:`\Phi(x) = \tfrac12\operatorname{erfc}(-x/\sqrt2)`,

.. math::
    \log\Phi(x) = \log\bigl(\tfrac12\operatorname{erfcx}(-x/\sqrt2)\bigr) - \tfrac{x^2}{2},\quad x < 0;\qquad
    \log\Phi(x) = \operatorname{log1p}\bigl(-\tfrac12\operatorname{erfcx}(x/\sqrt2)\,e^{-x^2/2}\bigr),\quad x \ge 0,

where neither branch cancels (for :math:`x < 0` both terms are negative; for :math:`x \ge 0` the argument of
``log1p`` is at most 1/2, and for large :math:`x` the result is :math:`-\Phi(-x)` to full relative precision).
The factors :math:`e^{\pm x^2}` and :math:`e^{-x^2/2}` are the rounding-sensitive part: :math:`x^2` rounded
costs a relative error of :math:`x^2` ulps in the exponential (7e-14 at :math:`x = -26`).  They are computed
from the split :math:`x = h + l`, :math:`h` the multiple of :math:`2^{-12}` nearest :math:`x` (so :math:`h^2`
is exact for :math:`|x| \le 40`): :math:`e^{s x^2} = e^{s h^2}e^{s\,l\,(x + h)}`.

Every branch is evaluated on its input clipped into its own range and chosen by ``where``, so no branch a
value does not take produces an infinity or a NaN (nor, under automatic differentiation, a NaN gradient), and
``erfcx``'s overflow below :math:`-26.63` is chosen, not computed: no floating-point exception but
:math:`x^2/2` past :math:`|x| = 1.9\times10^{154}` in ``log_ndtr``.  NaN propagates.  Measured in double
precision against ``mpmath`` at 40 digits (dense grids and 6000 random points in each range,
``tests/test_special_xp.py``): relative error of ``erfcx`` at most 7.8e-16 (3.5 ulps) wherever it is finite,
of ``log_ndtr`` at most 1.0e-15 (4.5 ulps) wherever it is a normal number (:math:`x < 37.5`; beyond, the
subnormal :math:`-\Phi(-x)`).  SciPy's own functions round :math:`x^2` in the exponential: up to 5.7e-14
for ``erfcx`` below -4 and 2.4e-13 for ``log_ndtr`` near 37.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["erfcx", "log_ndtr"]

#: the boundary between Cody's approximations of erf and of erfcx, and between his middle and outer ranges
_SMALL, _LARGE = 0.46875, 4.0
_INV_SQRT_PI = 0.56418958354775628695  # 1/sqrt(pi)
_SQRT_HALF = 0.70710678118654752440  # 1/sqrt(2)
#: below -this erfcx(x) overflows (the float nearest sqrt(log(DBL_MAX / 2)), the last finite value 1.79769e308):
#: the negative branch is evaluated on x clipped here (no overflow), and inf chosen below it
_OVERFLOW = 26.62873571375149
#: above this exp(-x^2/2) underflows to 0 (at 38.6); the log1p branch is clipped here, still exact
_UNDERFLOW = 40.0
#: the grid of the split x = h + l (h^2 exact for |h| < 2^8)
_SPLIT = 4096.0

# Cody (1969): erf(x) = x P(x^2)/Q(x^2), |x| <= 0.46875 (coefficients of ascending powers)
_ERF_P = (
    3.20937758913846947e3,
    3.77485237685302021e2,
    1.13864154151050156e2,
    3.16112374387056560e0,
    1.85777706184603153e-1,
)
_ERF_Q = (
    2.84423683343917062e3,
    1.28261652607737228e3,
    2.44024637934444173e2,
    2.36012909523441209e1,
    1.0,
)
# Cody (1969): erfcx(x) = P(x)/Q(x), 0.46875 <= x <= 4
_MID_P = (
    1.23033935479799725e3,
    2.05107837782607147e3,
    1.71204761263407058e3,
    8.81952221241769090e2,
    2.98635138197400131e2,
    6.61191906371416295e1,
    8.88314979438837594e0,
    5.64188496988670089e-1,
    2.15311535474403846e-8,
)
_MID_Q = (
    1.23033935480374942e3,
    3.43936767414372164e3,
    4.36261909014324716e3,
    3.29079923573345963e3,
    1.62138957456669019e3,
    5.37181101862009858e2,
    1.17693950891312499e2,
    1.57449261107098347e1,
    1.0,
)
# Cody (1969): erfcx(x) = (1/sqrt(pi) - z P(z)/Q(z))/x, z = 1/x^2, x >= 4
_TAIL_P = (
    6.58749161529837803e-4,
    1.60837851487422766e-2,
    1.25781726111229246e-1,
    3.60344899949804439e-1,
    3.05326634961232344e-1,
    1.63153871373020978e-2,
)
_TAIL_Q = (
    2.33520497626869185e-3,
    6.05183413124413191e-2,
    5.27905102951428412e-1,
    1.87295284992346725e0,
    2.56852019228982242e0,
    1.0,
)


def erfcx(xp: ModuleType, x: Any) -> Any:
    r"""The scaled complementary error function :math:`\operatorname{erfcx}(x) = e^{x^2}\operatorname{erfc}(x)`.

    Parameters
    ----------
    xp : module
        The array namespace of ``x`` (the array API standard's functions; numpy itself will do).
    x : array
        Real floating-point arrays, any shape.

    Returns
    -------
    array
        :math:`\operatorname{erfcx}(x)`, same shape and dtype: Cody's (1969) rational approximations
        (module docstring) for :math:`x \ge -0.46875`, :math:`2e^{x^2} - \operatorname{erfcx}(-x)` below,
        ``inf`` for :math:`x < -26.63` (overflow), 0 at :math:`+\infty`, NaN for NaN.  Relative error at most
        7.8e-16 wherever finite.
    """
    a = xp.abs(x)
    tail = _erfcx_beyond(xp, a)
    near = _erfcx_near_zero(xp, _clip(xp, x, -_SMALL, _SMALL))
    negative = 2.0 * _exp_square(xp, _clip(xp, x, -_OVERFLOW, -_SMALL), 1.0) - tail
    negative = xp.where(x < -_OVERFLOW, xp.full_like(x, float("inf")), negative)
    return xp.where(a <= _SMALL, near, xp.where(x < 0.0, negative, tail))


def log_ndtr(xp: ModuleType, x: Any) -> Any:
    r"""The log of the standard normal distribution function, :math:`\log\Phi(x)`, accurate in both tails.

    .. math::
        \log\Phi(x) = \begin{cases}
            \log\bigl(\tfrac12\operatorname{erfcx}(-x/\sqrt2)\bigr) - x^2/2, & x < 0,\\
            \operatorname{log1p}\bigl(-\tfrac12\operatorname{erfcx}(x/\sqrt2)e^{-x^2/2}\bigr), & x \ge 0,
        \end{cases}

    with :func:`erfcx` of a non-negative argument (Cody, Math. Comp. 23, 1969) in both.

    Parameters
    ----------
    xp : module
        The array namespace of ``x`` (the array API standard's functions; numpy itself will do).
    x : array
        Real floating-point arrays, any shape.

    Returns
    -------
    array
        :math:`\log\Phi(x)`, same shape and dtype: :math:`\sim -x^2/2 - \log(-x) - \tfrac12\log 2\pi` as
        :math:`x \to -\infty` (``-inf`` at ``-inf``), :math:`\sim -\Phi(-x)` as :math:`x \to \infty` (to full
        relative precision, until it underflows to 0 past :math:`x \approx 38.5`), NaN for NaN.  Relative error
        at most 1.0e-15.
    """
    t = xp.where(x < 0.0, -x, x) * _SQRT_HALF  # |x|/sqrt(2) (not abs: its derivative at 0 is 0 in some libraries)
    scaled = xp.where(t <= _SMALL, _erfcx_near_zero(xp, _clip(xp, t, -_SMALL, _SMALL)), _erfcx_beyond(xp, t))
    half = 0.5 * scaled  # Phi(-|x|) exp(x^2/2), in (0, 1/2]
    left = _clip(xp, x, None, 0.0)
    # (half >= 1e-300 unless x < -4e299, where x^2/2 is infinite anyway: no log(0) where x = +inf; (0.5 x) x is
    # finite up to |x| = 1.9e154, x^2 only to 1.3e154)
    below = xp.log(_clip(xp, half, 1e-300, None)) - (0.5 * left) * left
    right = _clip(xp, x, 0.0, _UNDERFLOW)
    above = xp.log1p(-half * _exp_square(xp, right, -0.5))
    return xp.where(x < 0.0, below, above)


# ------------------------------------------------------------------ the pieces
def _erfcx_near_zero(xp: ModuleType, x: Any) -> Any:
    r""":math:`e^{x^2}(1 - \operatorname{erf}(x))` with Cody's erf, for :math:`|x| \le 0.46875` (no rounding
    matters in :math:`x^2 \le 0.22`; :math:`1 - \operatorname{erf}(x) \ge 0.5` does not cancel)."""
    x2 = x * x
    return xp.exp(x2) * (1.0 - x * _horner(_ERF_P, x2) / _horner(_ERF_Q, x2))


def _erfcx_beyond(xp: ModuleType, a: Any) -> Any:
    r""":math:`\operatorname{erfcx}(a)` for :math:`a \ge 0.46875` (any other ``a`` gives a finite value not
    used): Cody's middle approximation up to 4, his asymptotic form beyond (0 at ``inf``, NaN for NaN)."""
    mid = _clip(xp, a, _SMALL, _LARGE)
    middle = _horner(_MID_P, mid) / _horner(_MID_Q, mid)
    big = _clip(xp, a, _LARGE, None)
    inv = 1.0 / big
    z = inv * inv  # (underflows to 0 for a > 1e154, where the correction is below rounding anyway)
    outer = (_INV_SQRT_PI - z * (_horner(_TAIL_P, z) / _horner(_TAIL_Q, z))) * inv
    return xp.where(a <= _LARGE, middle, outer)


def _exp_square(xp: ModuleType, x: Any, scale: float) -> Any:
    r""":math:`e^{s x^2}` for :math:`|x| \le 40` (``scale`` :math:`s` = 1 or -1/2) to a few ulps: with
    :math:`h = 2^{-12}\operatorname{round}(2^{12}x)` and :math:`l = x - h` (both exact),
    :math:`x^2 = h^2 + l(x + h)`, :math:`h^2` exact, so :math:`e^{s x^2} = e^{s h^2} e^{s l (x + h)}` rounds
    only in ``exp`` and the product (its derivative, through :math:`l`, is :math:`2 s x e^{s x^2}`)."""
    head = xp.round(x * _SPLIT) / _SPLIT
    low = x - head
    return xp.exp(scale * (head * head)) * xp.exp(scale * (low * (x + head)))


def _horner(coefficients: tuple[float, ...], x: Any) -> Any:
    """The polynomial with these coefficients of ascending powers at ``x``."""
    value = coefficients[-1] * x + coefficients[-2]
    for c in reversed(coefficients[:-2]):
        value = value * x + c
    return value


def _clip(xp: ModuleType, x: Any, low: float | None, high: float | None) -> Any:
    """``x`` clipped into ``[low, high]`` (NaN stays NaN) by ``where`` alone: ``clip``'s keywords and scalar
    ``where`` arguments are later than some libraries' versions."""
    if low is not None:
        x = xp.where(x < low, xp.full_like(x, low), x)
    if high is not None:
        x = xp.where(x > high, xp.full_like(x, high), x)
    return x
