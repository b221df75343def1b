"""The Bayesian-optimisation loops of ``relaxep reproduce constrained_bo`` (torch, BoTorch and GPyTorch).

This module imports torch at its top: :mod:`relaxep.experiments.studies.constrained_bo` imports it inside its
cells only, so neither ``import relaxep`` nor the study registry imports torch.  Everything runs in double
precision on the CPU, inputs scaled to the unit cube.

Problems (maximisation; the objective is observed only where the point is feasible, a failure gives its label):

* ``townsend``: BoTorch's community notebook ``notebooks_community/clf_constrained_bo`` (Fanjin Wang, 2025):
  ``f = cos((x1 - 0.1) x2)^2 + x1 sin(3 x1 + x2)`` on ``[-2.25, 2.25] x [-2.5, 1.75]``, feasible where
  ``c = (2 cos t - cos(2t)/2 - cos(3t)/4 - cos(4t)/8)^2 + (2 sin t)^2 - x1^2 - x2^2 > 0``, ``t = atan2(x1, x2)``
  (Townsend's Chebfun example); 68% of the box is feasible.  The notebook's ``_optimal_value = 1.660`` is not
  the constrained maximum: SLSQP from a 3001^2 grid gives 2.0239884 at (2.00529, 1.19445), Chebfun's
  -2.0239884 for the minimisation of ``-f``; regret is against 2.0239884.
* ``hartmann``: ``-botorch.test_functions.ConstrainedHartmann()`` (6-d, feasible where ``||x||_2 <= 1``,
  8% of the cube; Letham et al. 2019); the maximum 3.32237 lies inside the ball.
* ``preference``: the Hartmann-6 utility ``-hartmann(x)`` behind pairwise answers, Astudillo, Lin, Bakshy & Frazier
  (2023)'s protocol (facebookresearch/qEUBO): ``4 d = 24`` uniform random pairs, then one pair per iteration by
  qEUBO (64 Sobol QMC samples, ``num_restarts = q d = 12``, ``raw_samples = 30 q d = 360``); the answer is the
  argmax of the utilities plus Gumbel noise of scale 0.1619 (their default "logit" level 2).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from botorch.acquisition.analytic import (
    LogConstrainedExpectedImprovement,
    LogExpectedImprovement,
)
from botorch.acquisition.preference import qExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import Model, ModelList
from botorch.optim import optimize_acqf
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling import SobolQMCNormalSampler
from botorch.test_functions.synthetic import ConstrainedHartmann, Hartmann
from botorch.utils.transforms import unnormalize
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood
from gpytorch.means import ConstantMean
from gpytorch.mlls import ExactMarginalLogLikelihood, VariationalELBO
from gpytorch.models import ApproximateGP
from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy
from torch import Tensor
from torch.quasirandom import SobolEngine

__all__ = ["FAILURE_PROBLEMS", "failure_trial", "missing", "preference_trial", "probe"]

DTYPE = torch.double
#: ``optimize_acqf`` settings of the failure tasks (q = 1; modest, for 2 cores)
NUM_RESTARTS, RAW_SAMPLES = 8, 256
#: the qEUBO protocol's settings (Astudillo et al. 2023): pairs, restarts, raw samples, QMC samples, noise scale
PREF_INIT, PREF_RESTARTS, PREF_RAW, PREF_MC, PREF_NOISE = 24, 12, 360, 64, 0.1619
HARTMANN_MAX = 3.32237


def townsend(X: Tensor) -> Tensor:
    """The notebook's objective ``cos((x1 - 0.1) x2)^2 + x1 sin(3 x1 + x2)`` (to maximise)."""
    x1, x2 = X[..., 0], X[..., 1]
    return torch.cos((x1 - 0.1) * x2) ** 2 + x1 * torch.sin(3 * x1 + x2)


def townsend_feasible(X: Tensor) -> Tensor:
    """The notebook's feasibility: ``c > 0`` with Townsend's cardioid-like boundary, ``t = atan2(x1, x2)``."""
    x1, x2 = X[..., 0], X[..., 1]
    t = torch.atan2(x1, x2)
    r = 2 * torch.cos(t) - 0.5 * torch.cos(2 * t) - 0.25 * torch.cos(3 * t) - 0.125 * torch.cos(4 * t)
    return r**2 + (2 * torch.sin(t)) ** 2 - x1**2 - x2**2 > 0


_HARTMANN = ConstrainedHartmann(dim=6)  # (evaluate_true ignores negate: the objective below negates)


@dataclass(frozen=True)
class FailureProblem:
    """A task whose objective is hidden where the point fails: bounds, objective, feasibility, optimum, start."""

    bounds: list[list[float]]
    objective: Callable[[Tensor], Tensor]
    feasible: Callable[[Tensor], Tensor]
    optimum: float
    floor: float  # the regret's reference before any feasible point: the worst feasible value
    n_init: int  # 2 (d + 1) Sobol points, the notebook's rule

    @property
    def dim(self) -> int:
        return len(self.bounds[0])


FAILURE_PROBLEMS: dict[str, FailureProblem] = {
    "townsend": FailureProblem([[-2.25, -2.5], [2.25, 1.75]], townsend, townsend_feasible, 2.0239884, -1.8688, 6),
    "hartmann": FailureProblem(
        [[0.0] * 6, [1.0] * 6],
        lambda X: -_HARTMANN.evaluate_true(X),
        lambda X: (_HARTMANN.evaluate_slack_true(X) >= 0).all(dim=-1),
        HARTMANN_MAX,
        0.0,
        14,
    ),
}


class VariationalGPClassifier(ApproximateGP, GPyTorchModel):
    """The community notebook's classifier, written from its description: a variational GP (Cholesky variational
    distribution, inducing points started at the data and learned), constant mean, ``Scale(RBF)`` kernel,
    Bernoulli (probit) likelihood, fitted by ``fit_gpytorch_mll`` on the ``VariationalELBO``.

    Its BoTorch output is ``g = f + e``, ``e ~ N(0, 1)``, so that ``P(g > 0) = Phi(mu / sqrt(1 + s^2))`` is the
    probit predictive probability of feasibility (the EP model's convention); the notebook instead feeds latent
    samples through the likelihood inside qLogEI's constraint.
    """

    _num_outputs = 1

    def __init__(self, train_X: Tensor, train_Y: Tensor) -> None:
        strategy = VariationalStrategy(self, train_X, CholeskyVariationalDistribution(train_X.shape[0]))
        super().__init__(strategy)
        self.mean_module = ConstantMean()
        self.covar_module = ScaleKernel(RBFKernel())
        self.likelihood = BernoulliLikelihood()
        self.train_inputs = (train_X,)
        self.train_targets = train_Y.squeeze(-1)
        self.to(train_X)

    def forward(self, x: Tensor) -> MultivariateNormal:
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def posterior(self, X: Tensor, output_indices: Any = None, observation_noise: Any = False,
                  posterior_transform: Any = None, **kwargs: Any) -> GPyTorchPosterior:  # fmt: skip
        """The latent posterior at ``X`` plus unit probit noise (see the class docstring)."""
        self.eval()
        latent = self(X)
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return GPyTorchPosterior(MultivariateNormal(latent.mean, latent.covariance_matrix + eye))


def _fit_vgp(X: Tensor, y: Tensor) -> Model:
    model = VariationalGPClassifier(X, y)
    fit_gpytorch_mll(VariationalELBO(model.likelihood, model, num_data=X.shape[0]))
    return model


def _fit_ep(X: Tensor, y: Tensor) -> Model:
    from relaxep.botorch import EPClassifierModel

    return EPClassifierModel(X, y.unsqueeze(-1))


#: classifier-based contenders: a fitted model of feasibility from (inputs in the unit cube, 0/1 labels)
CLASSIFIERS: dict[str, Callable[[Tensor, Tensor], Model]] = {"ep": _fit_ep, "vgp": _fit_vgp}


def _knn_model() -> str | None:
    """The name of a soft k-nearest-neighbour classifier model in the installed BoTorch, if it has one."""
    import botorch.models

    names = dir(botorch.models)
    try:
        import botorch_community.models as community

        names += dir(community)
    except ImportError:
        pass
    found = [n for n in names if "neighbo" in n.lower() or "knn" in n.lower()]
    return found[0] if found else None


def missing(method: str) -> str | None:
    """Why ``method`` cannot run here (a line), or ``None`` when it can."""
    import botorch

    if method in ("ep", "ep_preference"):
        try:
            import relaxep.botorch  # noqa: F401
        except ImportError:
            return "relaxep.botorch (EPClassifierModel, EPPreferenceModel) is not in this relaxep: skipped"
    if method == "knn" and _knn_model() is None:
        return f"BoTorch {botorch.__version__} has no soft k-nearest-neighbour classifier model: skipped"
    return None


def _fit_objective(X: Tensor, Y: Tensor) -> SingleTaskGP:
    model = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def _optimize(acqf: Any, dim: int, q: int = 1, restarts: int = NUM_RESTARTS, raw: int = RAW_SAMPLES) -> Tensor:
    bounds = torch.stack([torch.zeros(dim, dtype=DTYPE), torch.ones(dim, dtype=DTYPE)])
    candidate, _ = optimize_acqf(acqf, bounds=bounds, q=q, num_restarts=restarts, raw_samples=raw)
    return candidate.detach()


def _propose(method: str, U: Tensor, values: Tensor, feasible: Tensor, sobol: SobolEngine) -> Tensor:
    """The next point (1 x d, unit cube) of ``method`` from the unit-cube inputs, values (NaN if failed), labels.

    Until a point is feasible there is nothing to improve on: every method takes the seed's next Sobol point, so
    all share their path up to the first feasible observation (a classifier that has seen only failures, asked
    for its most probably feasible point, goes to the corners far from its data, which on ``hartmann`` fail).
    """
    dim = U.shape[-1]
    if method == "sobol" or not feasible.any():  # (no objective data yet: the seed's next Sobol point)
        return sobol.draw(1).to(DTYPE)
    if method == "impute_worst":
        worst = values[feasible].min()
        Y = torch.where(feasible, values, worst).unsqueeze(-1)
        model = _fit_objective(U, Y)
        return _optimize(LogExpectedImprovement(model, best_f=values[feasible].max()), dim)
    classifier = CLASSIFIERS[method](U, feasible.to(DTYPE))
    objective = _fit_objective(U[feasible], values[feasible].unsqueeze(-1))
    acqf = LogConstrainedExpectedImprovement(
        ModelList(objective, classifier), best_f=values[feasible].max(), objective_index=0,
        constraints={1: (0.0, None)},
    )  # fmt: skip
    return _optimize(acqf, dim)


def failure_trial(problem: str, method: str, seed: int, iterations: int) -> dict[str, Any]:
    """One seed of one contender on a hidden-failure task.

    The first ``n_init`` points of the seed's scrambled Sobol sequence start every method (and the ``sobol``
    method continues that sequence).  Returns the best feasible value and the regret after the start and after
    each iteration (``best``, ``regret``: lists of ``iterations + 1``), the failed evaluations among the
    iterations' points, and each iteration's seconds (model fits plus acquisition).
    """
    spec = FAILURE_PROBLEMS[problem]
    torch.manual_seed(seed)
    bounds = torch.tensor(spec.bounds, dtype=DTYPE)
    sobol = SobolEngine(spec.dim, scramble=True, seed=seed)
    U = sobol.draw(spec.n_init).to(DTYPE)

    def observe(u: Tensor) -> tuple[Tensor, Tensor]:
        x = unnormalize(u, bounds)
        ok = spec.feasible(x)
        return torch.where(ok, spec.objective(x), torch.nan), ok

    values, feasible = observe(U)

    def best() -> float:
        return float(values[feasible].max()) if feasible.any() else math.nan

    trace, seconds, failures, errors = [best()], [], 0, []
    for _ in range(iterations):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                u = _propose(method, U, values, feasible, sobol)
            except Exception as exc:  # a failed fit or acquisition: a Sobol point, named in the row
                errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")
                u = sobol.draw(1).to(DTYPE)
        seconds.append(time.perf_counter() - start)
        value, ok = observe(u)
        failures += int(not bool(ok.all()))
        U, values, feasible = torch.cat([U, u]), torch.cat([values, value]), torch.cat([feasible, ok])
        trace.append(best())
    regret = [spec.optimum - (spec.floor if math.isnan(b) else b) for b in trace]
    return {"problem": problem, "method": method, "seed": seed, "iterations": iterations, "best": trace,
            "regret": regret, "failures": failures, "seconds": seconds, "errors": errors}  # fmt: skip


def _answer(pairs: Tensor, generator: torch.Generator) -> Tensor:
    """Comparisons ``(winner, loser)`` (indices into the pairs' rows, flattened) under Gumbel (logit) noise."""
    utility = -Hartmann(dim=6).evaluate_true(pairs.reshape(-1, 6)).reshape(-1, 2)
    uniform = torch.rand(utility.shape, generator=generator, dtype=DTYPE).clamp(1e-12, 1 - 1e-12)
    first_wins = (utility - PREF_NOISE * torch.log(-torch.log(uniform))).argmax(dim=-1) == 0
    base = 2 * torch.arange(pairs.shape[0])
    winner = torch.where(first_wins, base, base + 1)
    return torch.stack([winner, torch.where(first_wins, base + 1, base)], dim=-1)


def _fit_preference(method: str, X: Tensor, C: Tensor) -> Model:
    if method == "ep_preference":
        from relaxep.botorch import EPPreferenceModel

        return EPPreferenceModel(X, C)
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    model = PairwiseGP(X, C)
    fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model))
    return model


def _inference_regret(model: Model, X: Tensor) -> float:
    """The utility regret of the queried item of highest posterior mean (in-sample, no optimisation)."""
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)
    x = X[int(mean.argmax())].unsqueeze(0)
    return HARTMANN_MAX + float(Hartmann(dim=6).evaluate_true(x))


def preference_trial(method: str, seed: int, iterations: int) -> dict[str, Any]:
    """One seed of qEUBO with one preference model (``pairwise_gp`` or ``ep_preference``).

    ``regret``: the utility regret of the queried item the model ranks first, after the start and after each
    query (``iterations + 1``); ``best_seen_regret``: that of the best item queried, at the end; ``seconds``:
    each iteration's model fit plus qEUBO's optimisation.
    """
    torch.manual_seed(seed)
    start_gen = torch.Generator().manual_seed(seed)
    answer_gen = torch.Generator().manual_seed(10_000 + seed)
    pairs = torch.rand(PREF_INIT, 2, 6, generator=start_gen, dtype=DTYPE)
    X, C = pairs.reshape(-1, 6), _answer(pairs, start_gen)
    regret, seconds, errors = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _fit_preference(method, X, C)
        regret.append(_inference_regret(model, X))
        for _ in range(iterations):
            start = time.perf_counter()
            try:
                sampler = SobolQMCNormalSampler(torch.Size([PREF_MC]), seed=seed)
                acqf = qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)
                pair = _optimize(acqf, 6, q=2, restarts=PREF_RESTARTS, raw=PREF_RAW).unsqueeze(0)
            except Exception as exc:  # a failed acquisition: a random pair, named in the row
                errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")
                pair = torch.rand(1, 2, 6, dtype=DTYPE)
            C = torch.cat([C, _answer(pair, answer_gen) + X.shape[0]])
            X = torch.cat([X, pair.reshape(-1, 6)])
            model = _fit_preference(method, X, C)  # (timed with the query it answers)
            seconds.append(time.perf_counter() - start)
            regret.append(_inference_regret(model, X))
    best_seen = HARTMANN_MAX + float(Hartmann(dim=6).evaluate_true(X).min())
    return {"problem": "preference", "method": method, "seed": seed, "iterations": iterations, "regret": regret,
            "best_seen_regret": best_seen, "failures": 0, "seconds": seconds, "errors": errors}  # fmt: skip


def probe(problem: str, method: str, iterations: int) -> float:
    """Seconds of one iteration at the size of a run's last (``n_init + iterations`` points or pairs; seed 0)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if problem == "preference":
            gen = torch.Generator().manual_seed(0)
            pairs = torch.rand(PREF_INIT + iterations, 2, 6, generator=gen, dtype=DTYPE)
            X, C = pairs.reshape(-1, 6), _answer(pairs, gen)
            start = time.perf_counter()
            model = _fit_preference(method, X, C)
            acqf = qExpectedUtilityOfBestOption(pref_model=model, sampler=SobolQMCNormalSampler(torch.Size([PREF_MC])))
            _optimize(acqf, 6, q=2, restarts=PREF_RESTARTS, raw=PREF_RAW)
            return time.perf_counter() - start
        spec = FAILURE_PROBLEMS[problem]
        sobol = SobolEngine(spec.dim, scramble=True, seed=0)
        U = sobol.draw(spec.n_init + iterations).to(DTYPE)
        x = unnormalize(U, torch.tensor(spec.bounds, dtype=DTYPE))
        ok = spec.feasible(x)
        start = time.perf_counter()
        _propose(method, U, torch.where(ok, spec.objective(x), torch.nan), ok, sobol)
        return time.perf_counter() - start


def pin_threads() -> Callable[[], None]:
    """One torch thread (returns the undo); numpy's BLAS is pinned by the caller's ``threadpool_limits``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    return lambda: torch.set_num_threads(before)
