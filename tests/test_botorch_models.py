"""relaxep.botorch: the EP classifier as BoTorch's feasibility model, the EP preference learner behind PairwiseGP's
interface.  Ground truth is the fitted estimators themselves: P(g > 0) is predict_proba, the output's covariance
the fitted posterior's predict_latent(full_cov=True) + I, the utility predict(return_std=True); gradients are
checked against central finite differences; BoTorch's acquisitions run end to end through optimize_acqf."""

import numpy as np
import pytest

pytest.importorskip("botorch", reason="relaxep.botorch needs the optional extra: pip install 'relaxep[botorch]'")

import torch
from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
from botorch.acquisition.analytic import LogConstrainedExpectedImprovement, LogProbabilityOfFeasibility
from botorch.acquisition.objective import GenericMCObjective
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models import ModelList, SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from botorch.sampling import ListSampler, SobolQMCNormalSampler
from botorch.utils.datasets import SupervisedDataset
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    Exponentiation,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)

from problems import feasibility_problem
from relaxep import GPClassifier, GPPreferenceLearner, Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.botorch import EPClassifierModel, EPPreferenceModel, check_kernel, kernel_matrix

TOL = 1e-10  # agreement with the numpy estimator (float64 throughout)
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
LIKELIHOODS = {"noisy_probit": None, "probit": Probit(), "logistic": Logistic(), "noisy_step": NoisyStep(0.05)}


def _model(likelihood=None, **kwargs) -> EPClassifierModel:
    X, y = feasibility_problem()
    options = {} if likelihood is None else {"likelihood": likelihood}
    return EPClassifierModel(torch.tensor(X), torch.tensor(y, dtype=torch.float64)[:, None], **options, **kwargs)


@pytest.fixture(scope="module")
def models() -> dict:
    return {name: _model(lik) for name, lik in LIKELIHOODS.items()}


def _test_points(shape: tuple[int, ...], seed: int = 1) -> torch.Tensor:
    # (two columns; the last rows far outside the data, where p is near its floor or 0/1)
    X = np.random.default_rng(seed).uniform(-0.5, 1.5, (*shape, 2))
    X.reshape(-1, 2)[-1] = [4.0, -3.0]
    return torch.tensor(X)


# ------------------------------------------------------------------ the output g against the classifier
@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_probability_of_feasibility_is_predict_proba(models, name):
    model = models[name]
    X = _test_points((40, 1))
    log_pof = LogProbabilityOfFeasibility(model, constraints={0: (0.0, None)})(X)
    p = model.estimator.predict_proba(X[:, 0].numpy())[:, 1]
    np.testing.assert_allclose(torch.exp(log_pof).detach().numpy(), p, rtol=TOL, atol=TOL)
    # and in log space where p is small: log P(g > 0) is predict_log_proba
    np.testing.assert_allclose(
        log_pof.detach().numpy(), model.estimator.predict_log_proba(X[:, 0].numpy())[:, 1], rtol=1e-9, atol=TOL
    )


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_output_variance_is_latent_variance_plus_one(models, name):
    model = models[name]
    X = _test_points((30, 1))
    posterior = model.posterior(X)
    mean, var = model.estimator.latent_mean_and_variance(X[:, 0].numpy())
    np.testing.assert_allclose(posterior.variance[:, 0, 0].detach().numpy(), var + 1.0, rtol=TOL, atol=TOL)
    if name == "probit":  # g = f + e: the mean is the latent mean itself
        np.testing.assert_allclose(posterior.mean[:, 0, 0].detach().numpy(), mean, rtol=TOL, atol=TOL)
    else:  # the mean moves to put the likelihood's own probability at P(g > 0); the sign of mu stays
        clear = np.abs(mean) > 1e-6
        assert np.all(np.sign(posterior.mean[:, 0, 0].detach().numpy()[clear]) == np.sign(mean[clear]))


def _fitted_models() -> dict:
    X, y = feasibility_problem(60, seed=3)
    Xt, yt = torch.tensor(X), torch.tensor(y, dtype=torch.float64)[:, None]
    ard_matern = ConstantKernel(1.0) * Matern(length_scale=[0.5, 0.5], nu=2.5)
    white = ConstantKernel(1.0) * RBF(0.5) + WhiteKernel(0.01)
    return {
        "dense_rbf": EPClassifierModel(Xt, yt),
        "dense_ard_matern": EPClassifierModel(Xt, yt, kernel=ard_matern),
        "dense_rbf_plus_white": EPClassifierModel(Xt, yt, kernel=white, likelihood=Probit()),
        "dense_rq_fixed": EPClassifierModel(
            Xt, yt, kernel=ConstantKernel(2.0) * RationalQuadratic(0.4, 1.5), optimizer=None, likelihood=Logistic()
        ),
        "sparse_rbf": EPClassifierModel(Xt, yt, inducing_points=12, random_state=0),
        "sparse_matern_fixed": EPClassifierModel(
            Xt,
            yt,
            kernel=ConstantKernel(1.5) * Matern([0.3, 0.6], nu=1.5),
            inducing_points=10,
            optimizer=None,
            random_state=0,
        ),
    }


@pytest.fixture(scope="module")
def fitted() -> dict:
    return _fitted_models()


@pytest.mark.parametrize(
    "name",
    ["dense_rbf", "dense_ard_matern", "dense_rbf_plus_white", "dense_rq_fixed", "sparse_rbf", "sparse_matern_fixed"],
)
def test_joint_covariance_is_the_fitted_posteriors_plus_identity(fitted, name):
    model = fitted[name]
    X = _test_points((3, 8), seed=5)
    posterior = model.posterior(X)
    assert posterior.mean.shape == (3, 8, 1)
    cov = posterior.covariance_matrix.detach().numpy()
    for b in range(3):
        _, latent_cov = model.estimator.model_.predict_latent(X[b].numpy(), full_cov=True)
        np.testing.assert_allclose(cov[b], latent_cov + np.eye(8), rtol=TOL, atol=TOL)
        p = model.estimator.predict_proba(X[b].numpy())[:, 1]
        z = posterior.mean[b, :, 0] / posterior.variance[b, :, 0].sqrt()
        np.testing.assert_allclose(torch.special.ndtr(z).detach().numpy(), p, rtol=TOL, atol=TOL)


# ------------------------------------------------------------------ kernels in torch
KERNELS = [
    ConstantKernel(2.0),
    RBF(0.7),
    RBF([0.3, 1.4]),
    Matern(0.6, nu=0.5),
    Matern([0.4, 0.9], nu=1.5),
    Matern(0.8, nu=2.5),
    Matern([0.5, 2.0], nu=np.inf),
    RationalQuadratic(0.5, alpha=0.7),
    WhiteKernel(0.3),
    ConstantKernel(1.5) * RBF([0.5, 0.8]) + WhiteKernel(0.1),
    ConstantKernel(0.5) * Matern(0.7, nu=1.5) * RationalQuadratic(1.2, 2.0) + ConstantKernel(0.2),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernels_in_torch_equal_scikit_learns(kernel):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(7, 2)), rng.normal(size=(5, 2))
    A[3] = B[1]  # a coincident pair: WhiteKernel is still zero between two sets
    np.testing.assert_allclose(
        kernel_matrix(kernel, torch.tensor(A), torch.tensor(B)).numpy(), kernel(A, B), rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(kernel_matrix(kernel, torch.tensor(A)).numpy(), kernel(A), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("kernel", "name"),
    [
        (DotProduct(), "DotProduct"),
        (ExpSineSquared(), "ExpSineSquared"),
        (Exponentiation(RBF(), 2), "Exponentiation"),
        (Matern(nu=1.0), "nu=1.0"),
        (ConstantKernel() * (RBF() + DotProduct()), "DotProduct"),
    ],
)
def test_other_kernels_are_refused_by_name(kernel, name):
    with pytest.raises(TypeError, match=name):
        check_kernel(kernel)
    X, y = feasibility_problem()
    with pytest.raises(TypeError, match=name):
        EPClassifierModel(torch.tensor(X), torch.tensor(y, dtype=torch.float64)[:, None], kernel=kernel, optimizer=None)


# ------------------------------------------------------------------ gradients against finite differences
def _check_gradient(acquisition, X: torch.Tensor, rtol: float = 1e-6) -> None:
    X = X.clone().requires_grad_(True)
    acquisition(X).sum().backward()
    grad = X.grad.numpy().ravel()
    flat = X.detach().numpy().ravel()
    h = 1e-6
    numeric = np.empty_like(flat)
    for i in range(flat.size):
        up, down = flat.copy(), flat.copy()
        up[i] += h
        down[i] -= h
        f_up = acquisition(torch.tensor(up.reshape(X.shape))).sum().item()
        f_down = acquisition(torch.tensor(down.reshape(X.shape))).sum().item()
        numeric[i] = (f_up - f_down) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=rtol, atol=rtol * np.abs(numeric).max())


def _objective_model(seed: int = 0) -> tuple[SingleTaskGP, float]:
    X, _ = feasibility_problem(20, seed)
    Y = np.sin(3.0 * X[:, :1]) + X[:, 1:]
    gp = SingleTaskGP(torch.tensor(X), torch.tensor(Y), input_transform=Normalize(2), outcome_transform=None)
    return gp, float(Y.max())


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_feasibility_gradient_matches_finite_differences(models, name):
    X = _test_points((6, 1), seed=7)[:-1]  # (near the data: the probabilities vary there)
    _check_gradient(LogProbabilityOfFeasibility(models[name], constraints={0: (0.0, None)}), X)


def test_constrained_ei_gradient_matches_finite_differences(fitted):
    gp, best = _objective_model()
    for name in ("dense_ard_matern", "sparse_rbf", "dense_rbf_plus_white"):
        acquisition = LogConstrainedExpectedImprovement(
            ModelList(gp, fitted[name]), best, objective_index=0, constraints={1: (0.0, None)}
        )
        _check_gradient(acquisition, _test_points((5, 1), seed=8)[:-1])


def test_joint_posterior_gradient_over_q_points(fitted):
    """The mean and covariance over q = 8 points, differentiated together (a fixed linear functional of both)."""
    model = fitted["dense_ard_matern"]
    weights = torch.tensor(np.random.default_rng(0).normal(size=(8, 8)))

    def functional(X: torch.Tensor) -> torch.Tensor:
        posterior = model.posterior(X)
        return posterior.mean.sum(dim=(-1, -2)) + (posterior.covariance_matrix * weights).sum(dim=(-1, -2))

    _check_gradient(functional, _test_points((2, 8), seed=9) * 0.5 + 0.25)


# ------------------------------------------------------------------ BoTorch end to end
def test_optimize_acqf_runs_with_the_analytic_constrained_acquisitions(models):
    gp, best = _objective_model()
    ep_model = models["noisy_probit"]
    cei = LogConstrainedExpectedImprovement(
        ModelList(gp, ep_model), best, objective_index=0, constraints={1: (0.0, None)}
    )
    candidate, value = optimize_acqf(cei, BOUNDS, q=1, num_restarts=3, raw_samples=64)
    assert candidate.shape == (1, 2) and torch.isfinite(value)
    # at the candidate: log EI plus log P(feasible), the latter the classifier's own
    log_ei = LogExpectedImprovement(gp, best)(candidate[None])
    p = ep_model.estimator.predict_proba(candidate.numpy())[0, 1]
    np.testing.assert_allclose(value.item(), log_ei.item() + np.log(p), rtol=1e-9)
    pof = LogProbabilityOfFeasibility(ep_model, constraints={0: (0.0, None)})
    candidate, value = optimize_acqf(pof, BOUNDS, q=1, num_restarts=3, raw_samples=64)
    assert np.exp(value.item()) == pytest.approx(ep_model.estimator.predict_proba(candidate.numpy())[0, 1], rel=1e-9)


def test_monte_carlo_constraint_sees_the_probability_and_optimize_acqf_runs(models):
    ep_model = models["logistic"]
    X = _test_points((4, 1), seed=11)
    samples = ep_model.posterior(X).rsample(torch.Size([40000]))
    feasible = (samples > 0).double().mean(0)[:, 0, 0].numpy()
    p = ep_model.estimator.predict_proba(X[:, 0].numpy())[:, 1]
    np.testing.assert_allclose(feasible, p, atol=4 * 0.5 / np.sqrt(40000))
    gp, best = _objective_model()
    qlei = qLogExpectedImprovement(
        ModelList(gp, models["noisy_probit"]),
        best,
        sampler=ListSampler(*(SobolQMCNormalSampler(torch.Size([64]), seed=seed) for seed in (0, 1))),
        objective=GenericMCObjective(lambda Z, X=None: Z[..., 0]),
        constraints=[lambda Z: -Z[..., 1]],
    )
    candidate, value = optimize_acqf(qlei, BOUNDS, q=2, num_restarts=2, raw_samples=16)
    assert candidate.shape == (2, 2) and torch.isfinite(value)


# ------------------------------------------------------------------ BoTorch's Model API
def test_model_api_construct_inputs_transforms_and_refusals():
    X, y = feasibility_problem()
    Xt, yt = torch.tensor(X) * 10.0 + 3.0, torch.tensor(y, dtype=torch.float64)[:, None]
    model = EPClassifierModel(Xt, yt, input_transform=Normalize(2), likelihood=Probit())
    assert model.num_outputs == 1 and model.batch_shape == torch.Size([]) and model.subset_output([0]) is model
    # the classifier was fitted on the normalised inputs; the posterior takes the original ones
    Xn = (Xt - Xt.min(0).values) / (Xt.max(0).values - Xt.min(0).values)
    np.testing.assert_allclose(model.estimator.X_train_, Xn.numpy(), rtol=1e-12)
    test = Xt[:5, None, :]
    log_pof = LogProbabilityOfFeasibility(model, constraints={0: (0.0, None)})(test)
    np.testing.assert_allclose(
        torch.exp(log_pof).detach().numpy(), model.estimator.predict_proba(Xn[:5].numpy())[:, 1], rtol=TOL
    )
    inputs = EPClassifierModel.construct_inputs(
        SupervisedDataset(Xt, yt, feature_names=["a", "b"], outcome_names=["ok"])
    )
    assert set(inputs) == {"train_X", "train_Y"}
    with pytest.raises(ValueError, match="one output"):
        model.subset_output([1])
    with pytest.raises(NotImplementedError, match="EP fit"):
        model.condition_on_observations(Xt[:2], yt[:2])
    with pytest.raises(ValueError, match=r"0 \(infeasible\) and 1"):
        EPClassifierModel(Xt, yt * 2.0)


def test_from_estimator_equals_the_fit_and_refuses_multiclass():
    X, y = feasibility_problem()
    clf = GPClassifier(likelihood=NoisyProbit(0.02)).fit(X, np.where(y == 1, "ok", "failed"))
    model = EPClassifierModel.from_estimator(clf)
    assert model.train_Y.shape == (X.shape[0], 1) and model.train_Y.sum().item() == y.sum()
    test = _test_points((10, 1))
    log_pof = LogProbabilityOfFeasibility(model, constraints={0: (0.0, None)})(test)
    np.testing.assert_allclose(
        torch.exp(log_pof).detach().numpy(), clf.predict_proba(test[:, 0].numpy())[:, 1], rtol=TOL, atol=TOL
    )  # ("ok" is classes_[1])
    labels = np.digitize(X[:, 0], [0.33, 0.66])
    multi = GPClassifier(optimizer=None).fit(X, labels)
    with pytest.raises(ValueError, match="3 classes"):
        EPClassifierModel.from_estimator(multi)


# ------------------------------------------------------------------ the preference model
def _comparisons(n_items: int = 30, m: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n_items, 2))
    utility = -((X[:, 0] - 0.7) ** 2) - (X[:, 1] - 0.3) ** 2
    pairs = np.array([rng.choice(n_items, 2, replace=False) for _ in range(m)])
    winner_first = utility[pairs[:, 0]] > utility[pairs[:, 1]]
    return X, np.where(winner_first[:, None], pairs, pairs[:, ::-1])


@pytest.fixture(scope="module")
def preference() -> dict:
    X, C = _comparisons()
    return {
        "dense": EPPreferenceModel(torch.tensor(X), torch.tensor(C)),
        "sparse": EPPreferenceModel(torch.tensor(X), torch.tensor(C), inducing_points=8, random_state=0),
        "logistic_matern": EPPreferenceModel(
            torch.tensor(X),
            torch.tensor(C),
            likelihood=Logistic(),
            kernel=ConstantKernel(1.0) * Matern([0.5, 0.5], nu=2.5),
        ),
    }


@pytest.mark.parametrize("name", ["dense", "sparse", "logistic_matern"])
def test_preference_posterior_is_the_learners_utility(preference, name):
    model = preference[name]
    X = _test_points((4, 5), seed=12)
    posterior = model.posterior(X)
    for b in range(4):
        mean, std = model.estimator.predict(X[b].numpy(), return_std=True)
        np.testing.assert_allclose(posterior.mean[b, :, 0].detach().numpy(), mean, rtol=TOL, atol=TOL)
        np.testing.assert_allclose(posterior.variance[b, :, 0].detach().numpy(), std**2, rtol=TOL, atol=TOL)
        _, cov = model.estimator.predict(X[b].numpy(), return_cov=True)
        np.testing.assert_allclose(posterior.covariance_matrix[b].detach().numpy(), cov, rtol=TOL, atol=TOL)


def test_preference_convention_is_pairwise_gps(preference):
    """Rows [winner, loser]: the utility learned is highest near the true optimum (0.7, 0.3)."""
    model = preference["dense"]
    grid = torch.tensor([[0.7, 0.3], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    mean = model.posterior(grid).mean[:, 0]
    assert torch.argmax(mean).item() == 0
    assert model.datapoints.shape == (30, 2) and model.comparisons.dtype == torch.long
    assert model.num_outputs == 1 and model.batch_shape == torch.Size([])


def test_eubo_and_qeubo_run_unchanged(preference):
    model = preference["dense"]
    eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    pair, value = optimize_acqf(eubo, BOUNDS, q=2, num_restarts=2, raw_samples=32)
    assert pair.shape == (2, 2) and torch.isfinite(value)
    _check_gradient(eubo, _test_points((3, 2), seed=13) * 0.5 + 0.25)
    qeubo = qExpectedUtilityOfBestOption(pref_model=model, sampler=SobolQMCNormalSampler(torch.Size([64]), seed=0))
    batch, value = optimize_acqf(qeubo, BOUNDS, q=3, num_restarts=2, raw_samples=32)
    assert batch.shape == (3, 2) and torch.isfinite(value)
    sparse = EPPreferenceModel.from_estimator(preference["sparse"].estimator)
    pair, value = optimize_acqf(
        AnalyticExpectedUtilityOfBestOption(pref_model=sparse), BOUNDS, q=2, num_restarts=2, raw_samples=32
    )
    assert torch.isfinite(value)
    with pytest.raises(NotImplementedError, match="EP fit"):
        model.fantasize(grid := torch.zeros(1, 2), None)
    del grid


def test_preference_from_estimator_equals_the_learner():
    X, C = _comparisons(seed=1)
    learner = GPPreferenceLearner(likelihood=NoisyProbit(0.05)).fit(X, C)
    model = EPPreferenceModel.from_estimator(learner)
    test = _test_points((6,))
    mean, std = learner.predict(test.numpy(), return_std=True)
    posterior = model.posterior(test)
    np.testing.assert_allclose(posterior.mean[:, 0].detach().numpy(), mean, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(posterior.variance[:, 0].detach().numpy(), std**2, rtol=TOL, atol=TOL)
