"""Old name of :mod:`relaxep.sites` (and of DoubleLoopEP, a site rule until 0.2); the old path goes in 0.4."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.rules", "relaxep.sites", elsewhere={"DoubleLoopEP": "relaxep.inference"})
