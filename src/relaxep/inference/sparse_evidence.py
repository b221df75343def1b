"""Old home of the sparse evidence gradient, now :mod:`relaxep.posterior.sparse_gradient` (goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.inference.sparse_evidence", "relaxep.posterior.sparse_gradient")
