"""Old home of the schedules, now :mod:`relaxep.inference.schedules` (the old path goes in 0.4)."""

from relaxep._moved import moved

__getattr__ = moved("relaxep.schedules", "relaxep.inference.schedules")
