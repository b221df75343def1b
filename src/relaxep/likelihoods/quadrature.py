r"""A tilted-moment integrator for smooth, increasing (log-concave) binary likelihoods :math:`t(g)`."""

from __future__ import annotations

from abc import abstractmethod
from functools import partial
from types import ModuleType
from typing import ClassVar

import numpy as np

from relaxep._typing import Array
from relaxep._xp import adaptive_or_fixed
from relaxep.likelihoods.base import TiltedLogZ
from relaxep.likelihoods.binary_base import BinaryLikelihood
from relaxep.likelihoods.quadrature_on import SinhNodes, sinh_nodes_on, tilted_log_t_on, tilted_log_z_on
from relaxep.likelihoods.sinh_rule import MAX_NODES, moments_from_nodes, sinh_nodes

__all__ = ["QuadratureLikelihood"]


class QuadratureLikelihood(BinaryLikelihood):
    r"""An increasing likelihood integrated by a mode-centred sinh rule.

    For a log-concave :math:`t` the tilted density :math:`p(g) \propto t(g)^u N(g | \mu, s^2)`
    is log-concave; its mode :math:`\hat g` solves :math:`u\,(\log t)'(\hat g) = (\hat g - \mu)/s^2`
    and lies in :math:`[\mu, \mu + s^2 u (\log t)'(\mu)]`, where a safeguarded Newton iteration
    finds it (for a likelihood that is not log-concave it finds a point of that bracket,
    which only places the nodes).  The integrals are then taken by the trapezoid rule in
    :math:`x` after the substitution :math:`g = \hat g + a \sinh x`, with :math:`a = \min(\ell, w)`
    (:math:`\ell` the Laplace standard deviation, :math:`w` the width of the likelihood's
    transition, ``_transition_width``): nodes are dense at the mode and spread
    geometrically into the tails, so both scales are resolved.  The step is chosen so that
    the transition at :math:`g = 0` is sampled at least every :math:`w/4`.  Against adaptive
    quadrature the error stays below 1e-10 for :math:`|\mu| \le 200`,
    :math:`10^{-4} \le s^2 \le 10^4`, :math:`u \in [0.3, 1]` (see ``tests/test_likelihoods.py``).

    A subclass writes :math:`\log t` and its two derivatives once, in the array namespace
    (:meth:`_folded_log_lik_in`, :meth:`_folded_dlog_lik_in`; numpy calls them with numpy).  The tilted integral
    is one method, :meth:`_folded_log_z_in`, with two algorithms by design: on numpy this adaptive rule (its Newton
    search stops when converged, its node count read from the batch), on another array library the same rule
    with fixed sizes, on the arrays' device (:mod:`relaxep.likelihoods.quadrature_on`; within 1e-8 of this one in
    a smaller box).  Relaxed EP's :math:`E[\log t]` (:meth:`_folded_expected_log_lik_in`) is the sum of
    :math:`\log t` over the same rule's normalised weights at ``u = 1``, on either.
    """

    _max_nodes: int = MAX_NODES
    tilted_on_device = True
    relaxed_on_device = True
    #: where the device rule's Newton search for the mode starts (``None``: the cavity mean)
    _newton_start: ClassVar[float | None] = None

    @property
    def _transition_width(self) -> float:
        """Width of the region around ``g = 0`` where ``t`` changes (1 for probit and logistic)."""
        return 1.0

    @abstractmethod
    def _folded_log_lik_in(self, xp: ModuleType, g: Array) -> Array:
        r""":math:`\log t(g)`, elementwise in the array namespace ``xp``."""

    @abstractmethod
    def _folded_dlog_lik_in(self, xp: ModuleType, g: Array) -> tuple[Array, Array]:
        r""":math:`(\log t)'` and :math:`(\log t)''`, elementwise in ``xp``."""

    def _folded_log_lik(self, g: Array) -> Array:
        return self._folded_log_lik_in(np, g)

    def _folded_dlog_lik(self, g: Array) -> tuple[Array, Array]:
        """First and second derivative of ``log t`` (numpy)."""
        return self._folded_dlog_lik_in(np, g)

    def _folded_log_z_in(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """The family's tilted integral: numpy's adaptive sinh rule on the host (:meth:`_adaptive_log_z`), the
        fixed-size one of :mod:`~relaxep.likelihoods.quadrature_on` elsewhere (:meth:`_fixed_log_z`)."""
        return adaptive_or_fixed(
            xp, lambda: self._adaptive_log_z(mean, var, power), lambda: self._fixed_log_z(xp, mean, var, power)
        )

    def _fixed_log_z(self, xp: ModuleType, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """The fixed-size rule's answer (:func:`~relaxep.likelihoods.quadrature_on.tilted_log_z_on`), in any ``xp``."""
        return tilted_log_z_on(xp, self._sinh_nodes_on(xp, mean, var, power), mean, var)

    def _sinh_nodes_on(self, xp: ModuleType, mean: Array, var: Array, power: float) -> SinhNodes:
        """The fixed-size rule's nodes and weights (:func:`~relaxep.likelihoods.quadrature_on.sinh_nodes_on`)."""
        log_t, dlog_t = partial(self._folded_log_lik_in, xp), partial(self._folded_dlog_lik_in, xp)
        return sinh_nodes_on(xp, log_t, dlog_t, mean, var, power, self._transition_width, self._newton_start)

    def _folded_expected_log_lik_in(self, xp: ModuleType, mean: Array, var: Array) -> Array:
        r""":math:`E[\log t(g)] = \sum_k w_k \log t(g_k)` on the tilted integral's nodes at ``u = 1``: numpy's
        adaptive rule's, elsewhere the fixed-size one's."""
        return adaptive_or_fixed(
            xp,
            lambda: self._folded_expected_log_lik(mean, var),
            lambda: tilted_log_t_on(xp, self._sinh_nodes_on(xp, mean, var, 1.0)),
        )

    def _folded_log_z_and_expected_in(self, xp: ModuleType, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        r"""Both; off the host from one set of nodes, ``log Z`` from the closed form where
        :attr:`closed_form_on_device` (as numpy's :meth:`log_z` at ``u = 1`` takes it)."""

        def fixed() -> tuple[TiltedLogZ, Array]:
            nodes = self._sinh_nodes_on(xp, mean, var, 1.0)
            closed = self.closed_form_on_device
            lz = self._folded_log_z_in(xp, mean, var, 1.0) if closed else tilted_log_z_on(xp, nodes, mean, var)
            return lz, tilted_log_t_on(xp, nodes)

        return adaptive_or_fixed(
            xp, lambda: (self._folded_log_z(mean, var, 1.0), self._folded_expected_log_lik(mean, var)), fixed
        )

    def _sinh_nodes(self, mean: Array, var: Array, power: float) -> tuple[Array, Array, Array]:
        """Nodes ``g_k``, normalised tilted weights and ``log Z`` (nodes on the last axis): the mode-centred sinh
        rule of :mod:`relaxep.likelihoods.sinh_rule`, the transition at ``g = 0``."""
        return sinh_nodes(
            self._folded_log_lik, self._folded_dlog_lik, mean, var, power, self._transition_width, 0.0, self._max_nodes
        )

    def _adaptive_log_z(self, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """The adaptive sinh rule's ``log Z`` and derivatives (numpy)."""
        return moments_from_nodes(*self._sinh_nodes(mean, var, power), mean, var)

    def _folded_cumulants(self, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        g, weights, _ = self._sinh_nodes(mean, var, 1.0)
        k1 = np.sum(weights * g, axis=-1)
        d = g - k1[..., None]
        k2 = np.sum(weights * d**2, axis=-1)
        k3 = np.sum(weights * d**3, axis=-1)
        k4 = np.sum(weights * d**4, axis=-1) - 3.0 * k2**2
        return k1, k2, k3, k4

    def _folded_expected_log_lik(self, mean: Array, var: Array) -> Array:
        g, weights, _ = self._sinh_nodes(mean, var, 1.0)
        return np.sum(weights * self._folded_log_lik(g), axis=-1)
