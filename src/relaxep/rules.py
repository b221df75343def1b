"""Old name of :mod:`relaxep.sites`, kept so that ``from relaxep.rules import EP`` still works."""

from relaxep.inference.double_loop import DoubleLoopEP  # a site rule until 0.2, now an inference method
from relaxep.sites import *  # noqa: F403
from relaxep.sites import __all__ as _sites

__all__ = [*_sites, "DoubleLoopEP"]
