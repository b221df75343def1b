"""Old home of DaskGPClassifier, now :mod:`relaxep.estimators.dask` (the old path goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.dask", "relaxep.estimators.dask")
