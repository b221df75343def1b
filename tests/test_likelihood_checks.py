"""A likelihood given to the wrong estimator: refused at ``fit``, before any data work, by a message that names
``likelihood``, what was given and the estimator to use instead."""

from __future__ import annotations

import re

import numpy as np
import pytest

from relaxep import (
    Gaussian,
    GPClassifier,
    GPOrdinalClassifier,
    GPRegressor,
    Laplace,
    Logistic,
    MultinomialProbit,
    NegativeBinomial,
    NoisyProbit,
    NoisyStep,
    OrdinalProbit,
    Poisson,
    Probit,
    RobustMax,
    StudentT,
)
from relaxep.estimators.dask import DaskGPClassifier, DaskGPRegressor

#: each kind of likelihood, and the local and Dask estimators that fit it (None: no Dask estimator does)
KINDS = {
    "binary": ((Probit(), Logistic(), NoisyProbit(0.01, 1.0), NoisyStep(0.05)), "GPClassifier", "DaskGPClassifier"),
    "multi-class": ((MultinomialProbit(), RobustMax()), "GPClassifier", None),
    "ordinal": ((OrdinalProbit(),), "GPOrdinalClassifier", None),
    "count": ((Poisson(), NegativeBinomial()), "GPRegressor", "DaskGPRegressor"),
    "regression": ((Gaussian(), StudentT(), Laplace()), "GPRegressor", "DaskGPRegressor"),
}
ESTIMATORS = {
    "GPClassifier": (GPClassifier, ("binary", "multi-class")),
    "GPOrdinalClassifier": (GPOrdinalClassifier, ("ordinal",)),
    "GPRegressor": (GPRegressor, ("count", "regression")),
    "DaskGPClassifier": (DaskGPClassifier, ("binary",)),
    "DaskGPRegressor": (DaskGPRegressor, ("count", "regression")),
}


def _wrong_pairs():
    for name, (_, fits) in ESTIMATORS.items():
        for kind, (likelihoods, local, dask) in KINDS.items():
            if kind in fits:
                continue
            use = dask if name.startswith("Dask") and dask else local
            for likelihood in likelihoods:
                yield pytest.param(name, likelihood, use, id=f"{name}-{type(likelihood).__name__}")


class _Untouchable:
    """Data (and a Dask client) that fail on any use: the likelihood is checked before the data work."""

    def __getattr__(self, name):
        raise AssertionError(f"the data were used ({name}) before the likelihood was checked")

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data were converted before the likelihood was checked")

    def __len__(self):
        raise AssertionError("the data were measured before the likelihood was checked")


@pytest.mark.parametrize(("estimator", "likelihood", "use"), list(_wrong_pairs()))
def test_a_likelihood_for_another_estimator_names_the_estimator_to_use(estimator, likelihood, use):
    make, _ = ESTIMATORS[estimator]
    params = {"client": _Untouchable()} if estimator.startswith("Dask") else {}
    with pytest.raises(ValueError) as info:
        make(likelihood=likelihood, **params).fit(_Untouchable(), _Untouchable())
    message = str(info.value)
    assert isinstance(info.value, TypeError)  # (what these checks raised before: both, as scikit-learn's)
    assert message.startswith(f"likelihood={likelihood!r} is for ")
    assert re.search(rf"\buse {use}\b", message), message
    assert f"{estimator}'s likelihood must be" in message
    if estimator.startswith("Dask") and not use.startswith("Dask"):
        assert "no Dask estimator fits it" in message


@pytest.mark.parametrize(
    ("likelihood", "purpose"),
    [(Probit(), "two classes"), (RobustMax(), "more than two unordered classes"), (OrdinalProbit(), "ordered classes"),
     (Poisson(), "counts"), (StudentT(), "real targets")],
)  # fmt: skip
def test_the_message_says_what_the_likelihood_is_for(likelihood, purpose):
    wrong = GPOrdinalClassifier if not isinstance(likelihood, OrdinalProbit) else GPClassifier
    with pytest.raises(ValueError, match=f"^likelihood=.* is for {purpose}: use "):
        wrong(likelihood=likelihood).fit(_Untouchable(), _Untouchable())


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_a_name_is_still_a_type_error(estimator):
    make, _ = ESTIMATORS[estimator]
    params = {"client": _Untouchable()} if estimator.startswith("Dask") else {}
    with pytest.raises(TypeError, match=r"^likelihood must be None or .*\(pass an instance, not a name\)") as info:
        make(likelihood="probit", **params).fit(_Untouchable(), _Untouchable())
    assert not isinstance(info.value, ValueError)


def test_a_multi_class_likelihood_on_two_classes_asks_for_a_binary_one():
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.raises(TypeError, match=r"^likelihood=MultinomialProbit\(\) is for more than two classes.*binary"):
        GPClassifier(likelihood=MultinomialProbit(), optimizer=None).fit(X, np.arange(12) % 2)


def test_the_right_likelihoods_still_fit():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(24, 1))
    three = np.searchsorted([-0.5, 0.5], X[:, 0])
    GPClassifier(likelihood=RobustMax(), optimizer=None).fit(X, three)
    GPOrdinalClassifier(likelihood=OrdinalProbit(), optimizer=None).fit(X, three)
    GPRegressor(likelihood=Poisson(), optimizer=None).fit(X, three)
    GPRegressor(likelihood=Laplace(), optimizer=None).fit(X, X[:, 0])
