"""Old home of the multi-class likelihoods, now :mod:`relaxep.likelihoods.multiclass` (goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.multiclass.likelihoods", "relaxep.likelihoods.multiclass")
