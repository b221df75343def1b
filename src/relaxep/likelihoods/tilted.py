r"""The answer every likelihood gives about a Gaussian cavity: :math:`\log Z` of the tilted distribution and its
first two derivatives in the cavity mean (:class:`TiltedLogZ`), and the refusal of a form that has no rule off the
host (:func:`refuse_off_host`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from relaxep._typing import Array

__all__ = ["TiltedLogZ", "refuse_off_host"]


@dataclass(frozen=True)
class TiltedLogZ:
    r"""``log Z`` of a tilted distribution and its first two derivatives in the cavity mean."""

    log_z: Array
    dlog_z: Array
    d2log_z: Array

    def moments(self, cavity_mean: Array, cavity_var: Array) -> tuple[Array, Array]:
        r"""Tilted mean and variance, :math:`\mu + s^2 d_1` and :math:`s^2 + s^4 d_2`."""
        return (
            cavity_mean + cavity_var * self.dlog_z,
            cavity_var + cavity_var**2 * self.d2log_z,
        )


def refuse_off_host(message: str) -> Callable[[], NoReturn]:
    """The off-host branch of :func:`relaxep._xp.adaptive_or_fixed` where a form has no fixed-size rule (or none
    accurate enough): it raises ``NotImplementedError(message)``, and a device fit computes those sites on the host."""

    def refuse() -> NoReturn:
        raise NotImplementedError(message)

    return refuse
