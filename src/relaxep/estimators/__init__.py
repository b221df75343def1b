"""The scikit-learn estimators: :class:`~relaxep.estimators.classifier.GPClassifier` (and, in
:mod:`relaxep.estimators.dask`, ``DaskGPClassifier``, which needs the ``dask`` extra), thin layers
over the fitted models of ``_models`` and the evidence search of ``_search``."""

from relaxep.estimators._search import SearchStep
from relaxep.estimators.classifier import GPClassifier

__all__ = ["GPClassifier", "SearchStep"]
