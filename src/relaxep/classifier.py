"""Old home of GPClassifier, now :mod:`relaxep.estimators.classifier` (the old path goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.classifier", "relaxep.estimators.classifier")
