"""The scikit-learn estimators: :class:`~relaxep.estimators.classifier.GPClassifier`,
:class:`~relaxep.estimators.regressor.GPRegressor`,
:class:`~relaxep.estimators.ordinal.GPOrdinalClassifier`,
:class:`~relaxep.estimators.preference.GPPreferenceLearner` (and, in :mod:`relaxep.estimators.dask`,
``DaskGPClassifier``, which needs the ``dask`` extra), thin layers over the fitted models of ``_models``,
the plan of a fit (``_plan``), the hyperparameter vector (``_hyper``) and the evidence search of ``_search``."""

from relaxep.estimators._search import SearchStep
from relaxep.estimators.classifier import GPClassifier
from relaxep.estimators.heteroscedastic import GPHeteroscedasticRegressor
from relaxep.estimators.ordinal import GPOrdinalClassifier
from relaxep.estimators.preference import GPPreferenceLearner
from relaxep.estimators.regressor import GPRegressor

__all__ = [
    "GPClassifier",
    "GPHeteroscedasticRegressor",
    "GPOrdinalClassifier",
    "GPPreferenceLearner",
    "GPRegressor",
    "SearchStep",
]
