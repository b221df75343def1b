"""Old name of :mod:`relaxep.sites`, kept so that ``from relaxep.rules import EP`` still works."""

from relaxep.sites import *  # noqa: F403
from relaxep.sites import __all__  # noqa: F401
