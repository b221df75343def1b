"""statsmodels baselines for the shipped GLM data sets: pointwise log predictive densities of held-out rows.

:func:`baseline_lpd` fits the classical parametric counterparts of a data set of
:func:`relaxep.datasets.load_glm` on some rows and scores the others: for each test row the log probability (mass
or density) of its observed target under each fitted model, at the maximum-likelihood parameters (a plug-in
predictive, not a Bayesian one).  A pure function, no plotting, no caching.

statsmodels is not a dependency of relaxep: it is imported inside the functions, so this module imports without
it and :func:`baseline_lpd` raises ``ImportError`` when it is missing.

Models, by the set's family (every model has an intercept):

* binomial (cbpp, esoph, snails): ``statsmodels GLM binomial (logit)``, ``statsmodels.api.GLM`` with the
  ``Binomial`` family fitted by IRLS on (successes, failures); the test row's log density is
  ``scipy.stats.binom.logpmf(successes, trials, p)`` at the fitted probability.
* beta (GasolineYield, FoodExpenditure, ReadingSkills): ``statsmodels BetaModel``,
  ``statsmodels.othermod.betareg.BetaModel``, logit link for the mean and a constant precision (log link),
  fitted by BFGS; the log density is the fitted beta distribution's ``logpdf`` (``results.get_distribution``).
* count (bioChemists, NMES1988), each fitted by BFGS (at most 2000 iterations) from statsmodels' default start:

  - ``statsmodels ZeroInflatedNegativeBinomialP``: NB2 (``p=2``) with a logit zero inflation on **all** the
    inputs (``exog_infl`` is the same design as the count part, intercept included; this converges on both sets
    and in every fold of a 10-fold cross-validation, which is why the constant-only inflation is not used);
  - ``statsmodels hurdle NB``: ``statsmodels.discrete.truncated_model.HurdleCountModel`` with
    ``dist="negbin"`` (NB2 truncated at zero for the positive counts) and ``zerodist="poisson"`` (the hurdle:
    ``P(y = 0) = exp(-mu0)``, a Poisson zero model on all the inputs; statsmodels has no logit hurdle);
  - ``statsmodels NegativeBinomialP`` (NB2), ``statsmodels ZeroInflatedPoisson`` (logit inflation by a
    constant) and ``statsmodels Poisson GLM`` (IRLS), for context.

  The log mass of a test count comes from the models' own predictive probabilities,
  ``results.predict(exog, which="prob", y_values=range(max + 1))`` (the Poisson GLM:
  ``results.get_distribution(exog).logpmf``).

The design on the training rows: an intercept, then ``X``'s columns; a column that is constant on the training
rows (an indicator of a level no training row has, e.g. cbpp's herd 8, one row) or a linear combination of the
columns before it (GasolineYield's ``gravity``, ``pressure`` and ``temp10`` are fixed by the batch, so three
batch indicators go: the fit is Ferrari & Cribari-Neto's ``yield ~ batch + temp``) is dropped, which gives a test
row of that level the reference level's effect.  Every remaining column with more than two distinct values on the
training rows (the continuous inputs, counts and ordered codes) is standardised with the training rows' mean and
standard deviation, and the test rows with the same numbers; with an intercept this changes only the
parametrisation, not the maximum-likelihood fit, and it helps the optimisers converge.

Failures: a fit that raises, reports that it has not converged (``mle_retvals["converged"]``, the GLMs'
``converged``; both parts for the hurdle) or gives non-finite parameters does not stop the others: its test rows
get NaN and a :class:`GLMBaselineWarning` names the set, the model and the reason.  statsmodels' own warnings
while fitting (``ConvergenceWarning``, ``HessianInversionWarning``, overflow in line searches) are caught; those
of a failed fit are quoted in its :class:`GLMBaselineWarning`, those of a converged fit (about standard errors or
intermediate steps) are dropped.  The returned dict holds only the log densities.

What statsmodels does not flag: separation.  When a level's training rows have no successes (cbpp's herds 9 and
14 had all their cases in period 1, so a fold that holds out that row leaves the herd at zero), the binomial MLE
does not exist; IRLS still reports convergence, with the herd's coefficient near -21, and a held-out row with
cases in that herd gets a log mass far below the others' (-226 for herd 14's 11 of 19 in a 10-fold split).  And
when the training counts are underdispersed (e.g. a split that keeps only small counts) the negative-binomial
models' MLE sits at the boundary ``alpha = 0``, which BFGS steps across: those fits are reported as not converged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from relaxep.datasets.glm import load_glm

__all__ = ["BASELINE_MODELS", "GLMBaselineWarning", "baseline_lpd"]

Floats = NDArray[np.float64]

#: the models :func:`baseline_lpd` fits, by the data set's family, in the returned dict's order
BASELINE_MODELS: dict[str, tuple[str, ...]] = {
    "binomial": ("statsmodels GLM binomial (logit)",),
    "beta": ("statsmodels BetaModel",),
    "count": (
        "statsmodels ZeroInflatedNegativeBinomialP",
        "statsmodels hurdle NB",
        "statsmodels NegativeBinomialP",
        "statsmodels ZeroInflatedPoisson",
        "statsmodels Poisson GLM",
    ),
}

#: BFGS's iteration cap for the count and beta models (statsmodels' default for the count models is 35)
MAXITER = 2000


class GLMBaselineWarning(RuntimeWarning):
    """A statsmodels baseline failed or did not converge; its log densities are NaN."""


def _design(X: Floats, train: NDArray[np.intp], test: NDArray[np.intp]) -> tuple[Floats, Floats]:
    """The training and test designs: an intercept, then the columns of ``X`` that are neither constant nor
    linearly dependent on the columns before them on the training rows, the non-binary ones standardised with
    the training rows' statistics."""
    X_train, X_test = X[train], X[test]
    keep: list[int] = []
    basis = np.ones((len(X_train), 1))
    for j in range(X.shape[1]):
        column = X_train[:, j]
        scale = column.std()
        if scale == 0.0:
            continue
        centred = (column - column.mean()) / scale
        residual = centred - basis @ np.linalg.lstsq(basis, centred, rcond=None)[0]
        if np.linalg.norm(residual) <= 1e-8 * np.sqrt(len(column)):
            continue
        keep.append(j)
        basis = np.column_stack([basis, centred])
    D_train, D_test = X_train[:, keep].copy(), X_test[:, keep].copy()
    for j in range(D_train.shape[1]):
        column = D_train[:, j]
        if np.unique(column).size > 2:
            mean, sd = column.mean(), column.std()
            D_train[:, j] = (column - mean) / sd
            D_test[:, j] = (D_test[:, j] - mean) / sd
    ones_train, ones_test = np.ones((len(D_train), 1)), np.ones((len(D_test), 1))
    return np.hstack([ones_train, D_train]), np.hstack([ones_test, D_test])


def _converged(results: Any) -> bool:
    """Whether statsmodels reports the fit converged (every part, for the hurdle model)."""
    if hasattr(results, "mle_retvals") and results.mle_retvals is not None:
        flag = results.mle_retvals.get("converged", False)
        return bool(np.all(flag))
    return bool(getattr(results, "converged", False))


def _count_lpd(results: Any, y_test: Floats, **exog: Floats) -> Floats:
    """Log mass of each test count from the fitted model's own predictive probabilities of 0..max(y_test)
    (``exog``: the test designs ``predict`` takes)."""
    counts = y_test.astype(np.int64)
    support = np.arange(counts.max() + 1)
    prob = np.asarray(results.predict(which="prob", y_values=support, **exog), dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.take_along_axis(prob, counts[:, None], axis=1)[:, 0])


#: a model's fit (training design, training rows -> results) and its scoring (results, test design, test rows)
_Fitter = tuple[Callable[[Floats, NDArray[np.intp]], Any], Callable[[Any, Floats, NDArray[np.intp]], Floats]]


def _fitters(family: str, y: Floats, trials: Floats | None) -> dict[str, _Fitter]:
    """Each model of ``BASELINE_MODELS[family]`` by name: how to fit it and how to score test rows."""
    import statsmodels.api as sm
    from scipy import stats
    from statsmodels.discrete.count_model import ZeroInflatedNegativeBinomialP, ZeroInflatedPoisson
    from statsmodels.discrete.discrete_model import NegativeBinomialP
    from statsmodels.discrete.truncated_model import HurdleCountModel
    from statsmodels.othermod.betareg import BetaModel

    if family == "binomial":
        n = np.asarray(trials, dtype=np.float64)
        (binomial,) = BASELINE_MODELS["binomial"]
        return {
            binomial: (
                lambda D, rows: sm.GLM(
                    np.column_stack([y[rows], n[rows] - y[rows]]), D, family=sm.families.Binomial()
                ).fit(),
                lambda res, D, rows: stats.binom.logpmf(y[rows], n[rows], res.predict(D)),
            )
        }
    if family == "beta":
        (beta,) = BASELINE_MODELS["beta"]

        def beta_lpd(results: Any, D: Floats, rows: NDArray[np.intp]) -> Floats:
            return results.get_distribution(exog=D, exog_precision=np.ones((len(D), 1))).logpdf(y[rows])

        return {beta: (lambda D, rows: BetaModel(y[rows], D).fit(maxiter=MAXITER, disp=False), beta_lpd)}
    bfgs = {"method": "bfgs", "maxiter": MAXITER, "disp": 0}
    zinb, hurdle, nb, zip_, poisson = BASELINE_MODELS["count"]
    return {
        zinb: (
            lambda D, rows: ZeroInflatedNegativeBinomialP(y[rows], D, exog_infl=D, p=2).fit(**bfgs),
            lambda res, D, rows: _count_lpd(res, y[rows], exog=D, exog_infl=D),
        ),
        hurdle: (
            lambda D, rows: HurdleCountModel(y[rows], D, dist="negbin", zerodist="poisson").fit(**bfgs),
            lambda res, D, rows: _count_lpd(res, y[rows], exog=D),
        ),
        nb: (
            lambda D, rows: NegativeBinomialP(y[rows], D, p=2).fit(**bfgs),
            lambda res, D, rows: _count_lpd(res, y[rows], exog=D),
        ),
        zip_: (
            lambda D, rows: ZeroInflatedPoisson(y[rows], D).fit(**bfgs),
            lambda res, D, rows: _count_lpd(res, y[rows], exog=D),
        ),
        poisson: (
            lambda D, rows: sm.GLM(y[rows], D, family=sm.families.Poisson()).fit(),
            lambda res, D, rows: res.get_distribution(exog=D).logpmf(y[rows]),
        ),
    }


def baseline_lpd(name: str, train: ArrayLike, test: ArrayLike) -> dict[str, Floats]:
    """Pointwise log predictive densities of the test rows under statsmodels' GLMs fitted on the training rows.

    Parameters
    ----------
    name : str
        A data set of :func:`relaxep.datasets.load_glm` (a key of ``GLM_DATASETS``).
    train, test : array_like of int or bool
        The training and test rows, as indices into the set's rows (or boolean masks).  They may overlap:
        ``train = test = all rows`` gives each row's log-likelihood term at the maximum-likelihood fit, whose sum
        is statsmodels' ``results.llf``.

    Returns
    -------
    dict of str to ndarray of shape (n_test,)
        For each model of :data:`BASELINE_MODELS` for the set's family, by its name, the log probability mass
        (binomial and count sets) or density (beta sets) of each test row's observed target under the fitted
        model; NaN for every row of a model whose fit failed or did not converge (a
        :class:`GLMBaselineWarning` says which and why).

    Raises
    ------
    ValueError
        If ``name`` is not a GLM data set.
    ImportError
        If statsmodels is not installed.

    Notes
    -----
    The design: an intercept; columns constant or linearly dependent on the training rows dropped; non-binary
    columns standardised with the training rows' mean and standard deviation (it helps convergence and leaves the
    maximum-likelihood fit unchanged).  See the module's docstring for the models and their settings.
    """
    data = load_glm(name)
    train_rows = np.arange(len(data.y))[np.asarray(train)]
    test_rows = np.arange(len(data.y))[np.asarray(test)]
    D_train, D_test = _design(data.X, train_rows, test_rows)
    out: dict[str, Floats] = {}
    for model, (fit, lpd) in _fitters(data.family, data.y, data.trials).items():
        reason = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                results = fit(D_train, train_rows)
                if not _converged(results):
                    reason = "did not converge"
                elif not np.all(np.isfinite(np.asarray(results.params))):
                    reason = "non-finite parameters"
                else:
                    values = np.asarray(lpd(results, D_test, test_rows), dtype=np.float64)
            except Exception as error:  # any statsmodels failure: this model's rows are NaN, the others go on
                reason = f"raised {type(error).__name__}: {error}"
        if reason is None:
            out[model] = values
            continue
        quoted = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        detail = f" (statsmodels warned: {'; '.join(quoted)})" if quoted else ""
        warnings.warn(f"{name}: {model} {reason}{detail}; its log densities are NaN", GLMBaselineWarning, stacklevel=2)
        out[model] = np.full(len(test_rows), np.nan)
    return out
