"""Old home of :func:`infer_multiclass`, now :mod:`relaxep.inference.multiclass` (the old path goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.multiclass.inference", "relaxep.inference.multiclass")
