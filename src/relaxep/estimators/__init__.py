"""The scikit-learn estimators: :class:`~relaxep.estimators.classifier.GPClassifier`,
:class:`~relaxep.estimators.regressor.GPRegressor`,
:class:`~relaxep.estimators.ordinal.GPOrdinalClassifier`,
:class:`~relaxep.estimators.preference.GPPreferenceLearner`,
:class:`~relaxep.estimators.heteroscedastic.GPHeteroscedasticRegressor` (and, in :mod:`relaxep.estimators.dask`,
``DaskGPClassifier`` and ``DaskGPRegressor``, which need the ``dask`` extra), thin layers on one base
(``_base``) over the fitted models of ``_models``, ``_multiclass_models`` and ``_two_latent_model``, the plan of a
fit (``_plan``), the hyperparameter vector (``_hyper``) and the evidence search of ``_search``."""

from relaxep.estimators._mixture import HyperSamples
from relaxep.estimators._search import SearchStep
from relaxep.estimators._shape import Derivatives
from relaxep.estimators.classifier import GPClassifier
from relaxep.estimators.heteroscedastic import GPHeteroscedasticRegressor
from relaxep.estimators.ordinal import GPOrdinalClassifier
from relaxep.estimators.preference import GPPreferenceLearner
from relaxep.estimators.regressor import GPRegressor
from relaxep.estimators.survival import GPSurvivalRegressor

__all__ = [
    "Derivatives",
    "GPClassifier",
    "GPHeteroscedasticRegressor",
    "GPOrdinalClassifier",
    "GPPreferenceLearner",
    "GPRegressor",
    "GPSurvivalRegressor",
    "HyperSamples",
    "SearchStep",
]
