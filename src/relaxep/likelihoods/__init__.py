"""Likelihoods: each answers ``log Z`` and its derivatives for a target and a Gaussian cavity (GPML's design)."""

from relaxep.likelihoods.aft import LogLogisticAFT, LogNormalAFT, WeibullAFT
from relaxep.likelihoods.asymmetric_laplace import AsymmetricLaplace
from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.beta import Beta
from relaxep.likelihoods.binary import Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.likelihoods.binary_base import BinaryLikelihood
from relaxep.likelihoods.binomial import Binomial
from relaxep.likelihoods.coxph import CoxPH
from relaxep.likelihoods.gamma import Gamma
from relaxep.likelihoods.gaussian import Gaussian
from relaxep.likelihoods.heteroscedastic import Heteroscedastic
from relaxep.likelihoods.laplace import Laplace
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit, RobustMax
from relaxep.likelihoods.negative_binomial import NegativeBinomial
from relaxep.likelihoods.ordinal import OrdinalProbit
from relaxep.likelihoods.poisson import Poisson
from relaxep.likelihoods.quadrature import QuadratureLikelihood
from relaxep.likelihoods.smooth import SmoothLikelihood
from relaxep.likelihoods.student_t import StudentT
from relaxep.likelihoods.survival import SurvivalLikelihood
from relaxep.likelihoods.survival_targets import interval_censored, right_censored
from relaxep.likelihoods.tobit import Tobit
from relaxep.likelihoods.two_latent import TwoLatentLikelihood
from relaxep.likelihoods.zero_modified import (
    HurdleNegativeBinomial,
    HurdlePoisson,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)

__all__ = [
    "AsymmetricLaplace",
    "Beta",
    "BinaryLikelihood",
    "Binomial",
    "CoxPH",
    "Gamma",
    "Gaussian",
    "Heteroscedastic",
    "HurdleNegativeBinomial",
    "HurdlePoisson",
    "Laplace",
    "Likelihood",
    "LogLogisticAFT",
    "LogNormalAFT",
    "Logistic",
    "MulticlassLikelihood",
    "MultinomialProbit",
    "NegativeBinomial",
    "NoisyProbit",
    "NoisyStep",
    "OrdinalProbit",
    "Poisson",
    "Probit",
    "QuadratureLikelihood",
    "RobustMax",
    "SmoothLikelihood",
    "StudentT",
    "SurvivalLikelihood",
    "TiltedLogZ",
    "Tobit",
    "TwoLatentLikelihood",
    "WeibullAFT",
    "ZeroInflatedNegativeBinomial",
    "ZeroInflatedPoisson",
    "interval_censored",
    "right_censored",
]
