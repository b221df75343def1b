"""relaxep.botorch.InformationGain and Straddle: the classifier's own active-learning criteria as BoTorch
acquisitions (ground truth: GPClassifier.information_gain, itself held to the mutual information by quad in
test_preference.py, and GPClassifier.straddle; gradients against central finite differences), and what BoTorch's
own BALD acquisitions do with the EP models: qBayesianActiveLearningByDisagreement refuses the classifier,
PairwiseBayesianActiveLearningByDisagreement runs on EPPreferenceModel and is its Monte Carlo BALD."""

import numpy as np
import pytest

pytest.importorskip("botorch", reason="relaxep.botorch needs the optional extra: pip install 'relaxep[botorch]'")

import torch
from botorch.acquisition import qBayesianActiveLearningByDisagreement
from botorch.acquisition.preference import PairwiseBayesianActiveLearningByDisagreement
from botorch.optim import optimize_acqf
from scipy.integrate import quad
from scipy.special import log_ndtr

from problems import feasibility_problem
from relaxep import Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.botorch import EPClassifierModel, EPPreferenceModel, InformationGain, Straddle
from relaxep.likelihoods.information import information_gain

TOL = 1e-10
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
LIKELIHOODS = {"noisy_probit": None, "probit": Probit(), "logistic": Logistic(), "noisy_step": NoisyStep(0.05),
               "sharp_noisy_probit": NoisyProbit(0.1, 0.2)}  # fmt: skip


@pytest.fixture(scope="module")
def models() -> dict:
    X, y = feasibility_problem(40)
    Xt, yt = torch.tensor(X), torch.tensor(y, dtype=torch.float64)[:, None]
    out = {name: EPClassifierModel(Xt, yt, **({} if lik is None else {"likelihood": lik}))
           for name, lik in LIKELIHOODS.items()}  # fmt: skip
    out["sparse"] = EPClassifierModel(Xt, yt, inducing_points=10, random_state=0)
    return out


def _candidates(n: int, seed: int) -> torch.Tensor:
    """``n`` candidates of shape (n, 1, 2): inside the data's square and beyond it (wide predictives)."""
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.uniform(-0.5, 1.5, (n, 1, 2)))


def _check_gradient(acquisition, X: torch.Tensor, rtol: float = 1e-6) -> None:
    X = X.clone().requires_grad_(True)
    acquisition(X).sum().backward()
    flat, h = X.detach().numpy().ravel(), 1e-6
    numeric = np.empty_like(flat)
    for i in range(flat.size):
        up, down = flat.copy(), flat.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (acquisition(torch.tensor(up.reshape(X.shape))).sum().item()
                      - acquisition(torch.tensor(down.reshape(X.shape))).sum().item()) / (2 * h)  # fmt: skip
    np.testing.assert_allclose(X.grad.numpy().ravel(), numeric, rtol=rtol, atol=rtol * np.abs(numeric).max())


@pytest.mark.parametrize("name", [*LIKELIHOODS, "sparse"])
def test_information_gain_is_the_classifiers_bald_and_its_gradient_is_exact(models, name):
    model = models[name]
    X = _candidates(12, seed=1)
    got = InformationGain(model)(X).detach().numpy()
    want = model.estimator.information_gain(X[:, 0].numpy())
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    assert got.min() >= 0.0 and got.max() > 0.05  # (some candidates are worth a label)
    if name != "noisy_step":  # (its BALD has slopes, its expected entropy none: checked through the probit's)
        _check_gradient(InformationGain(model), X[:5])


@pytest.mark.parametrize("threshold", ["predictive", "link"])
@pytest.mark.parametrize("name", ["noisy_probit", "logistic", "sparse"])
def test_straddle_is_the_classifiers_and_its_gradient_is_exact(models, name, threshold):
    model = models[name]
    X = _candidates(10, seed=2)
    acquisition = Straddle(model, level=0.3, kappa=1.5, threshold=threshold)
    got = acquisition(X).detach().numpy()
    want = model.estimator.straddle(X[:, 0].numpy(), level=0.3, kappa=1.5, threshold=threshold)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    _check_gradient(acquisition, X[:5])


def test_optimize_acqf_finds_the_most_informative_point_of_a_grid(models):
    """On the default model, ``optimize_acqf`` ends at least as high as the best of a 41 x 41 grid of BALD values
    (less 1e-6: the grid's best point is a start for the optimiser's neighbourhood, not the exact maximum)."""
    model = models["noisy_probit"]
    torch.manual_seed(0)  # (the raw samples' draw)
    candidate, value = optimize_acqf(InformationGain(model), BOUNDS, q=1, num_restarts=8, raw_samples=1024)
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 41), np.linspace(0, 1, 41)), -1).reshape(-1, 2)
    assert value.item() >= model.estimator.information_gain(grid).max() - 1e-6
    assert value.item() == pytest.approx(model.estimator.information_gain(candidate.numpy())[0], rel=1e-9)
    candidate, value = optimize_acqf(Straddle(model), BOUNDS, q=1, num_restarts=8, raw_samples=1024)
    assert value.item() >= model.estimator.straddle(grid).max() - 1e-6


def test_refusals_name_what_is_wrong(models):
    with pytest.raises(TypeError, match="EPClassifierModel"):
        InformationGain(object())
    with pytest.raises(ValueError, match="threshold"):
        Straddle(models["probit"], threshold="median")
    with pytest.raises(ValueError, match="kappa"):
        Straddle(models["probit"], kappa=-1.0)
    with pytest.raises(ValueError, match="level"):
        Straddle(models["noisy_step"], level=0.01)  # (below the label-noise floor 0.05)
    with pytest.raises(RuntimeError):  # BoTorch's BALD is about a fully Bayesian model's hyperparameters
        qBayesianActiveLearningByDisagreement(models["probit"])


def test_botorchs_pairwise_bald_runs_on_the_preference_model_and_is_its_monte_carlo_bald():
    """BoTorch's PairwiseBayesianActiveLearningByDisagreement (no added noise: the probit comparison
    :math:`\\Phi(f_a - f_b)`, relaxep's default) on ``EPPreferenceModel``: within 4 Monte Carlo standard errors of
    the exact BALD of the pair's utility difference, :math:`N(\\mu_a - \\mu_b, w^\\top \\Sigma w)`."""
    rng = np.random.default_rng(0)
    items = rng.uniform(0.0, 1.0, (25, 2))
    utility = -((items[:, 0] - 0.7) ** 2) - (items[:, 1] - 0.3) ** 2
    pairs = np.array([rng.choice(25, 2, replace=False) for _ in range(40)])
    pairs = np.where((utility[pairs[:, 0]] > utility[pairs[:, 1]])[:, None], pairs, pairs[:, ::-1])
    model = EPPreferenceModel(torch.tensor(items), torch.tensor(pairs))
    n = 20_000
    acquisition = PairwiseBayesianActiveLearningByDisagreement(model, num_samples=n)
    X = torch.tensor(rng.uniform(0.0, 1.0, (6, 2, 2)))
    torch.manual_seed(0)
    got = acquisition(X).detach().numpy()
    posterior = model.posterior(X)
    mean = (posterior.mean[:, 0, 0] - posterior.mean[:, 1, 0]).detach().numpy()
    cov = posterior.covariance_matrix.detach().numpy()
    var = cov[:, 0, 0] + cov[:, 1, 1] - 2.0 * cov[:, 0, 1]
    want = information_gain(Probit(), mean, var) * np.log(2.0)  # (BoTorch's entropies are in nats)
    for m, v, g, w in zip(mean, var, got, want, strict=True):
        first, second = (_entropy_moment(m, v, k) for k in (1, 2))
        standard_error = np.sqrt(max(second - first**2, 0.0) / n)
        assert abs(g - w) <= 4 * standard_error + 1e-12, (g, w, standard_error)


def _entropy_moment(m: float, v: float, k: int) -> float:
    """E[h(Phi(f))^k] in nats under N(m, v), by quad."""

    def integrand(f: float) -> float:
        lp, lq = log_ndtr(f), log_ndtr(-f)
        return (-(np.exp(lp) * lp + np.exp(lq) * lq)) ** k * np.exp(-0.5 * (f - m) ** 2 / v) / np.sqrt(2 * np.pi * v)

    return quad(integrand, m - 12 * np.sqrt(v), m + 12 * np.sqrt(v), epsabs=1e-13)[0]
