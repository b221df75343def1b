r"""The likelihood interface: one question about a Gaussian cavity, asked with the targets.

Every likelihood answers GPML's question (``lik(hyp, y, mu, s2, 'infEP')``, Rasmussen & Nickisch
2010): for a target :math:`y`, a Gaussian cavity :math:`N(f | \mu, s^2)` on the latent and a power
:math:`u \in (0, 1]`, return

.. math::
    \log Z = \log \int p(y | f)^u N(f | \mu, s^2)\, df,
    \qquad \frac{\partial \log Z}{\partial \mu},
    \qquad \frac{\partial^2 \log Z}{\partial \mu^2}.

The tilted moments follow from these derivatives,
:math:`E[f] = \mu + s^2 \partial_\mu \log Z` and
:math:`\operatorname{Var}[f] = s^2 + s^4 \partial^2_\mu \log Z`, so every site-update
rule is generic in the likelihood.  Relaxed EP additionally needs the tilted
expectation :math:`E[\log p(y | f)]` (for its KL objective), the convergent methods the
tilted cumulants, and MCMC the pointwise :math:`\log p(y | f)`.

A new likelihood is one subclass: implement :meth:`Likelihood._log_z` and
:meth:`Likelihood._log_lik`; :meth:`Likelihood._expected_log_lik` and
:meth:`Likelihood._tilted_cumulants` default to a Gauss-Hermite rule centred on the tilted
moments, :meth:`Likelihood.check_targets` to finite reals.  Binary classification likelihoods
derive from :class:`~relaxep.likelihoods.binary_base.BinaryLikelihood`, which folds the labels
into :math:`g = y f` once, inside.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import ModuleType
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.gaussian_process.kernels import Hyperparameter

from relaxep._numerics import logsumexp
from relaxep._params import ParamsMixin
from relaxep._typing import Array
from relaxep._validation import check_target_vector, check_unit_interval
from relaxep._xp import HOST, namespace, to_numpy
from relaxep.likelihoods._hyperparameters import check_bounds, check_hyperparameter
from relaxep.likelihoods.additive_noise import AdditiveNoise, _as_floats
from relaxep.likelihoods.tilted import TiltedLogZ, refuse_off_host

__all__ = ["Likelihood", "TiltedLogZ", "check_bounds", "check_hyperparameter", "refuse_off_host"]

# probabilists' Gauss-Hermite rule: sum_k w_k h(x_k) ~ E[h(x)], x ~ N(0, 1)
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_GH_LOG_WEIGHTS = np.log(_GH_WEIGHTS / np.sqrt(2.0 * np.pi))
_HOST_TYPES = (np.ndarray, np.generic, float, int, list, tuple)  # (numpy's, whatever the array libraries)


class Likelihood(ParamsMixin, AdditiveNoise, ABC):
    r"""A factorising likelihood :math:`p(y | f) = \prod_i p(y_i | f_i)` of a scalar latent per target.

    Subclasses implement :meth:`_log_z` and :meth:`_log_lik`; the public methods validate and call
    them.  Optional hooks, with their defaults: :meth:`check_targets` (finite reals),
    :meth:`_expected_log_lik` and :meth:`_tilted_cumulants` (a Gauss-Hermite rule on the tilted
    distribution, centred on its moments), :meth:`predict` (the predictive).

    **One formula for every array library.**  A closed form is written once, against the array namespace
    ``xp`` (:meth:`_log_z_in`, :meth:`_expected_log_lik_in`; the per-library special functions from
    :mod:`relaxep._xp`: ``log_ndtr``, ``erfcx``, ``normal_tail``, ``expit``, ``log_expit``), and :meth:`_log_z`
    calls it with numpy: the host's digits and the device's are one code.  A data-dependent shortcut of numpy's
    (``if np.any(...)``, boolean indexing) becomes an ``xp.where`` whose unused side is evaluated on a finite
    stand-in.  :meth:`log_z` is the one entry: numpy arrays take :meth:`_log_z`, another library's arrays the
    namespaced form on their device where the likelihood has one at that power, else the host's form on a copy.
    Three class flags say where the namespaced form answers off the host, and the device loops read them:
    :attr:`closed_form_on_device` (EP's closed form, ``u = 1``), :attr:`tilted_on_device` (every power) and
    :attr:`relaxed_on_device` (Relaxed EP's :math:`E[\log p]` too).  A likelihood with a numpy form only sets
    none and still fits on a device: its sites are computed on the host.  A second algorithm is written only where
    the host's rule is adaptive (a Newton search run to convergence, node counts read from the data): the
    fixed-size rules of :mod:`~relaxep.likelihoods.quadrature_on`, :mod:`~relaxep.likelihoods.robust_on` and
    :mod:`~relaxep.likelihoods.counts_on`, each family's behind one tilted integral (its :meth:`_log_z_in`) whose
    numpy branch is the adaptive rule (:func:`relaxep._xp.adaptive_or_fixed`).

    Attributes
    ----------
    kind : str
        What the targets are, which says the estimator that fits them: ``"real"`` (the default: a real target per
        latent), ``"binary"``, ``"multiclass"``, ``"ordinal"``, ``"count"``, ``"survival"`` (censored event
        times) or ``"two_latent"`` (a real target with two latents, its mean's and its noise's).
    is_density : bool
        Whether every row's :math:`p(y_i | \ldots)` is a density of :math:`y` (true by default): then dividing
        :math:`y` by :math:`s` (``normalize_y``) adds :math:`\log s` to each log term, and leave-one-out values
        compare only with other densities (:func:`~relaxep.compare`).  False where some or all rows' values are
        probabilities (masses): classes, counts, and the censored rows of a Tobit or a survival model.
        Latent values per target (1 here; the multi-class likelihoods have one per class).
    target_width : int
        Values per target (GPflow's ``observation_dim``): 1, a scalar per site; 2 where a target may be a
        row, as a count likelihood's ``[count, log exposure]``.  Site arrays broadcast against the targets
        with such rows on a last axis of their own.
    class_targets : bool
        Whether the targets are class labels, whose :meth:`check_targets` takes ``both_classes``
        (:class:`~relaxep.likelihoods.BinaryLikelihood`, :class:`~relaxep.likelihoods.OrdinalProbit`).
    has_cumulants : bool
        Whether :meth:`tilted_cumulants` can be evaluated (the convergent inference methods
        need them); true for every scalar likelihood, through the quadrature default.
    heavy_tailed : bool
        Whether :math:`p(y|f)` has polynomial tails in :math:`f` (an outlier's site then has a negative
        precision); :class:`~relaxep.inference.Auto`'s default cascade then tries double-loop EP
        before convergent EP.
    """

    kind: ClassVar[str] = "real"
    is_density: ClassVar[bool] = True
    latent_dim: ClassVar[int] = 1
    target_width: ClassVar[int] = 1
    class_targets: ClassVar[bool] = False
    has_cumulants: ClassVar[bool] = True
    heavy_tailed: ClassVar[bool] = False
    #: whether :meth:`log_z_on` answers in any array library, on its device (EP's closed form at ``u = 1``)
    closed_form_on_device: ClassVar[bool] = False
    #: whether :meth:`log_z_on` answers there at every power :math:`u \in (0, 1]` (within 1e-8 of numpy's, 2e-6 for
    #: ``NoisyProbit`` at ``u < 1``): closed forms, the fixed-size sinh
    #: rule (:mod:`relaxep.likelihoods.quadrature_on`) of the quadrature likelihoods, or the fixed-size two-centre
    #: rules of the Student-t (:mod:`~relaxep.likelihoods.robust_on`) and the counts
    #: (:mod:`~relaxep.likelihoods.counts_on`)
    tilted_on_device: ClassVar[bool] = False
    #: whether :meth:`expected_log_lik_on` (and :meth:`log_z_on` at ``u = 1``) answer there: Relaxed EP's line
    #: search then runs on the device too (:mod:`relaxep.sites.relaxed_on`)
    relaxed_on_device: ClassVar[bool] = False
    #: whether the latent is a link of the target's mean (a log rate, a logit), on a unit scale whatever the targets'
    #: units: the default priors then take scale 1 for it, and an estimator's ``predict`` gives the predictive mean
    #: of the target (:meth:`predict_y`'s) rather than the latent's (the counts, the binomial, the beta, the gamma)
    latent_is_link: ClassVar[bool] = False
    #: what a count model's second column is given as in ``fit``: ``"exposure"`` (:math:`E[y] = \text{exposure}\,
    #: e^{f}`, the counts) or ``"trials"`` (the binomial's)
    exposure_name: ClassVar[str] = "exposure"
    #: constructor parameters that are hyperparameters, each a positive number with a ``<name>_bounds``
    #: parameter (a pair, or ``"fixed"``), learned in log space as scikit-learn's kernels' are
    hyperparameter_names: ClassVar[tuple[str, ...]] = ()
    #: the hyperparameters in the targets' units, each with the power of their scale it carries (2: a variance,
    #: 1: a standard deviation): the default priors scale these by the targets' (:mod:`relaxep.hyper.log_prior`)
    output_scale_hyperparameters: ClassVar[dict[str, int]] = {}

    # ------------------------------------------------------------ hyperparameters
    @property
    def hyperparameters(self) -> list[Hyperparameter]:
        """The hyperparameters, as scikit-learn's kernels list theirs."""
        return [Hyperparameter(name, "numeric", getattr(self, f"{name}_bounds")) for name in self.hyperparameter_names]

    @property
    def n_dims(self) -> int:
        """The number of learned (not fixed) hyperparameters."""
        return sum(not h.fixed for h in self.hyperparameters)

    @property
    def theta(self) -> Array:
        """The learned hyperparameters' logarithms (scikit-learn's ``Kernel.theta`` convention)."""
        return np.log([float(getattr(self, h.name)) for h in self.hyperparameters if not h.fixed])

    @property
    def bounds(self) -> Array:
        """Log-bounds of :attr:`theta`, shape ``(n_dims, 2)``."""
        rows = [np.log(np.asarray(h.bounds, dtype=float)).ravel() for h in self.hyperparameters if not h.fixed]
        return np.array(rows).reshape(-1, 2)

    def clone_with_theta(self, theta: ArrayLike) -> Likelihood:
        """A copy with the learned hyperparameters set to ``exp(theta)``."""
        theta = np.asarray(theta, dtype=float).ravel()
        names = [h.name for h in self.hyperparameters if not h.fixed]
        if theta.shape != (len(names),):
            raise ValueError(f"theta must have {len(names)} entries ({names}), got shape {theta.shape}")
        return type(self)(**{**self.get_params(), **{k: float(np.exp(v)) for k, v in zip(names, theta, strict=True)}})

    def dlog_z_dtheta(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Gradient of :math:`\log Z = \log\int p(y|f) N(f|\mu, s^2) df` in :attr:`theta`, shape ``(..., n_dims)``.

        :math:`\partial_\theta \log Z = E_{\hat p}[\partial_\theta \log p(y|f)]` (the tilted expectation).  At an
        EP fixed point the evidence is stationary in the sites, so its gradient in the likelihood's
        hyperparameters is the sum of these over the sites at their cavities (Seeger 2005).
        """
        y, mean, var = np.broadcast_arrays(*_as_floats(y, mean, var))
        if self.n_dims == 0:
            return np.zeros((*y.shape, 0))
        return self._dlog_z_dtheta(y, mean, var)

    def _dlog_z_dtheta(self, y: Array, mean: Array, var: Array) -> Array:
        f, weights = self._tilted_nodes(y, mean, var)
        return np.sum(weights[..., None] * self._dlog_lik_dtheta(y[..., None], f), axis=-2)

    def _dlog_lik_dtheta(self, y: Array, f: Array) -> Array:
        r""":math:`\partial \log p(y|f) / \partial\theta` (last axis: the learned hyperparameters)."""
        raise NotImplementedError(f"{type(self).__name__} has learned hyperparameters but no _dlog_lik_dtheta")

    def check_targets(self, y: ArrayLike, n: int | None = None) -> Array:
        """The targets as a float vector (of length ``n`` if given), or a ``ValueError`` naming ``y``.

        The default accepts finite reals (regression).  Likelihoods of class labels (:attr:`class_targets`)
        take a third argument, ``both_classes``: whether a single class is refused.
        """
        return check_target_vector(y, n, "targets", f"real numbers for {type(self).__name__}")

    def read_targets(self, y: ArrayLike, log_exposure: ArrayLike | None = None) -> Array:
        """An estimator's targets as this likelihood reads them, the array its fit takes (before :meth:`check_targets`
        converts it), checked: a ``ValueError`` naming ``y`` for targets of another form.

        The default reads one real target per row: a vector, or a column ``(n, 1)`` flattened; a family whose targets
        are rows (:attr:`target_width` 2) reads those (a Tobit's ``[value, code]``, counts with their exposure,
        survival times).

        Parameters
        ----------
        y : array_like
            The targets, as the estimator was given them (after its own validation).
        log_exposure : array_like of shape (n,), optional
            Each row's log exposure, for count likelihoods only (a ``ValueError`` naming ``exposure`` here).
        """
        self._no_exposure(log_exposure)
        arr = np.asarray(y, dtype=float)
        if arr.ndim == 2 and arr.shape[1] > 1:
            raise ValueError(
                f"y has {arr.shape[1]} outputs: with {self!r} fit one model per output (multi-output y needs the "
                "dense default Gaussian model)"
            )
        values = arr.reshape(-1) if arr.ndim == 2 else arr
        self.check_targets(values)
        return values

    def _no_exposure(self, log_exposure: ArrayLike | None) -> None:
        if log_exposure is not None:
            raise ValueError(f"exposure is for count likelihoods (Poisson, NegativeBinomial), not {self!r}")

    def log_z(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike, power: float = 1.0) -> TiltedLogZ:
        r"""``log Z``, ``d log Z / d mu`` and ``d2 log Z / d mu2`` of :math:`p(y|f)^u N(f | \mu, s^2)`.

        One entry for every array library: numpy arrays (and lists, scalars) take the host's form
        (:meth:`_log_z`); another library's arrays, with scikit-learn's ``array_api_dispatch`` on, the
        likelihood's namespaced form on their device (:meth:`_log_z_in`, where :meth:`on_device` at ``power``),
        else the host's form on a copy, its answer put back on their device.

        Parameters
        ----------
        y : array_like
            Targets (broadcast against ``mean`` and ``var``).
        mean, var : array_like
            Cavity mean :math:`\mu` and variance :math:`s^2 > 0` of the latent.
        power : float
            The power :math:`u \in (0, 1]` (Power EP); ``1`` for EP.
        """
        power = check_unit_interval(power, "power u")
        space = HOST if isinstance(mean, _HOST_TYPES) and isinstance(var, _HOST_TYPES) else namespace(mean, var)
        if space.on_host:
            return self._log_z(*_as_floats(y, mean, var), power)
        if self.on_device(power):
            return self._log_z_in(space.xp, y, mean, var, power)
        lz = self._log_z(*_as_floats(*(to_numpy(a) for a in (y, mean, var))), power)
        return TiltedLogZ(*(space.put(np.asarray(a)) for a in (lz.log_z, lz.dlog_z, lz.d2log_z)))

    def on_device(self, power: float = 1.0) -> bool:
        """Whether :meth:`log_z` answers on another library's device at ``power``: every power where
        :attr:`tilted_on_device`, ``u = 1`` where :attr:`closed_form_on_device`."""
        return self.tilted_on_device or (self.closed_form_on_device and power == 1.0)

    def _log_z_in(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        r""":meth:`log_z` in the array namespace ``xp`` (numpy included), on the arrays' device: the likelihood's one
        formula, which the closed forms' :meth:`_log_z` calls with numpy (their digits), or for a quadrature
        likelihood its one tilted integral, whose numpy branch is the host's adaptive rule
        (:func:`relaxep._xp.adaptive_or_fixed`).  Not defined for a likelihood with a numpy form only (the
        default): a device fit then computes its sites on the host."""
        raise NotImplementedError(f"{type(self).__name__} has no tilted log Z in an array namespace")

    def log_z_on(self, xp: ModuleType, y: Array, mean: Array, var: Array, power: float = 1.0) -> TiltedLogZ:
        r""":meth:`log_z` in the array namespace ``xp``, on the arrays' device (:meth:`_log_z_in`): at ``u = 1``
        where :attr:`closed_form_on_device`, at every power where :attr:`tilted_on_device`; with numpy,
        :meth:`log_z`'s digits.  The sites of a fit on another array library then never leave its device
        (:mod:`relaxep.inference.device_ep`)."""
        return self._log_z_in(xp, y, mean, var, power)

    def _expected_log_lik_in(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        r""":meth:`expected_log_lik` in the array namespace ``xp``, where :attr:`relaxed_on_device`: the tilted
        expectation

        .. math:: E_{\hat p}[\log p(y | f)],\qquad \hat p(f) \propto p(y | f)\, N(f | \mu, s^2),

        by the likelihood's closed form (the Gaussian, the Laplace, the noisy step), or from the nodes and weights
        of its tilted integral (the probits and the logistic: numpy's adaptive rule, elsewhere the fixed-size
        sinh rule of :mod:`relaxep.likelihoods.quadrature_on`, within 1e-8 of numpy's; the label-noise probit,
        not log-concave, up to 2e-6 far out, where the nodes miss its kink).  Relaxed EP's objective needs it at
        every point of its line search (:mod:`relaxep.sites.relaxed_on`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no tilted E[log p(y|f)] in an array namespace")

    def expected_log_lik_on(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> Array:
        r""":meth:`expected_log_lik` in the array namespace ``xp`` (:meth:`_expected_log_lik_in`), on the arrays'
        device, where :attr:`relaxed_on_device`.

        Parameters
        ----------
        xp : module
            The array namespace of ``mean`` and ``var``.
        y : array
            Targets, in ``xp`` (broadcast against ``mean`` and ``var``).
        mean, var : array
            Cavity mean :math:`\mu` and variance :math:`s^2 > 0` of the latent.
        """
        return self._expected_log_lik_in(xp, y, mean, var)

    def log_z_and_expected_on(self, xp: ModuleType, y: Array, mean: Array, var: Array) -> tuple[TiltedLogZ, Array]:
        r""":meth:`log_z_on` at ``u = 1`` and :meth:`expected_log_lik_on` at one cavity, the pair Relaxed EP's
        :math:`\mathrm{KL}(\hat p \| \mathrm{proj}\,\hat p)` takes (:func:`relaxep.sites.relaxed_kl`); a likelihood
        that has both from one computation overrides it (the Laplace's sides, the logistic's nodes)."""
        return self.log_z_on(xp, y, mean, var, 1.0), self.expected_log_lik_on(xp, y, mean, var)

    def log_predictive(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r""":math:`\log\int p(y | f)\, N(f | \mu, s^2)\, df`, the predictive density of :math:`y` at a Gaussian
        latent: :meth:`log_z` at power 1 without its derivatives (leave-one-out's terms, on the host)."""
        return self._log_predictive(*_as_floats(y, mean, var))

    def _log_predictive(self, y: Array, mean: Array, var: Array) -> Array:
        return self._log_z(y, mean, var, 1.0).log_z

    def log_lik(self, y: ArrayLike, f: ArrayLike) -> Array:
        r"""Pointwise :math:`\log p(y | f)` (for MCMC)."""
        return self._log_lik(*_as_floats(y, f))

    def expected_log_lik(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""Tilted expectation :math:`E_{\hat p}[\log p(y | f)]`, :math:`\hat p \propto p(y|f)\, N(f | \mu, s^2)`."""
        return self._expected_log_lik(*_as_floats(y, mean, var))

    def tilted_cumulants(self, y: ArrayLike, mean: ArrayLike, var: ArrayLike) -> tuple[Array, Array, Array, Array]:
        r"""The first four cumulants of the tilted :math:`\hat p(f) \propto p(y | f)\, N(f | \mu, s^2)`.

        From the cumulant generating function
        :math:`K(r) = r\mu + r^2 s^2/2 + \log Z(\mu + r s^2) - \log Z(\mu)`,

        .. math::
            \kappa_1 = \mu + s^2 L^{(1)},\quad \kappa_2 = s^2 + s^4 L^{(2)},\quad
            \kappa_3 = s^6 L^{(3)},\quad \kappa_4 = s^8 L^{(4)},

        :math:`L^{(k)}` the derivatives of :math:`\log Z` in the cavity mean.  The convergent
        methods' Newton steps need :math:`\kappa_3, \kappa_4` (the curvature of :math:`\log Z` in
        the cavity's natural parameters).
        """
        return self._tilted_cumulants(*_as_floats(y, mean, var))

    def predict(self, mean: ArrayLike, var: ArrayLike) -> Array:
        r"""The predictive at a latent :math:`N(\mu_*, s^2_*)`; binary likelihoods give :math:`P(y_* = +1)`."""
        raise NotImplementedError(f"{type(self).__name__} does not define a predictive")

    @abstractmethod
    def _log_z(self, y: Array, mean: Array, var: Array, power: float) -> TiltedLogZ:
        """``log Z`` and its derivatives in the cavity mean (arrays broadcast)."""

    @abstractmethod
    def _log_lik(self, y: Array, f: Array) -> Array:
        """Pointwise ``log p(y | f)`` (arrays broadcast)."""

    def _expected_log_lik(self, y: Array, mean: Array, var: Array) -> Array:
        f, weights = self._tilted_nodes(y, mean, var)
        return np.sum(weights * self._log_lik(y[..., None], f), axis=-1)

    def _tilted_cumulants(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array, Array, Array]:
        f, weights = self._tilted_nodes(y, mean, var)
        k1 = np.sum(weights * f, axis=-1)
        d = f - k1[..., None]
        k2 = np.sum(weights * d**2, axis=-1)
        return k1, k2, np.sum(weights * d**3, axis=-1), np.sum(weights * d**4, axis=-1) - 3.0 * k2**2

    def _tilted_nodes(self, y: Array, mean: Array, var: Array) -> tuple[Array, Array]:
        r"""Nodes and normalised weights of the tilted distribution (nodes on the last axis).

        Gauss-Hermite on :math:`N(\hat m, \hat v)`, the tilted moments from :meth:`_log_z`, with
        the importance ratio :math:`p(y|f) N(f|\mu, s^2) / N(f|\hat m, \hat v)` in the weights:
        exact for a Gaussian likelihood, and accurate wherever the tilted distribution is close
        to its Gaussian projection (80 nodes).
        """
        y, mean, var = np.broadcast_arrays(y, mean, var)
        m_hat, v_hat = self._log_z(y, mean, var, 1.0).moments(mean, var)
        usable = np.isfinite(m_hat) & np.isfinite(v_hat) & (v_hat > 0.0)
        m_hat, v_hat = np.where(usable, m_hat, mean), np.where(usable, v_hat, var)
        x = _GH_NODES
        f = m_hat[..., None] + np.sqrt(v_hat)[..., None] * x
        log_w = (
            _GH_LOG_WEIGHTS
            + self._log_lik(y[..., None], f)
            - 0.5 * (f - mean[..., None]) ** 2 / var[..., None]
            + 0.5 * x**2
            + 0.5 * np.log(v_hat / var)[..., None]
        )
        return f, np.exp(log_w - logsumexp(log_w, axis=-1, keepdims=True))
