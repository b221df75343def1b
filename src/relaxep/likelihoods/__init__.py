"""Likelihoods: each answers ``log Z`` and its derivatives for a target and a Gaussian cavity (GPML's design)."""

from relaxep.likelihoods.aft import LogLogisticAFT, LogNormalAFT, WeibullAFT
from relaxep.likelihoods.base import Likelihood, TiltedLogZ
from relaxep.likelihoods.binary import Logistic, NoisyProbit, NoisyStep, Probit
from relaxep.likelihoods.binary_base import BinaryLikelihood
from relaxep.likelihoods.coxph import CoxPH
from relaxep.likelihoods.gaussian import Gaussian
from relaxep.likelihoods.heteroscedastic import Heteroscedastic
from relaxep.likelihoods.laplace import Laplace
from relaxep.likelihoods.multiclass import MulticlassLikelihood, MultinomialProbit, RobustMax
from relaxep.likelihoods.negative_binomial import NegativeBinomial
from relaxep.likelihoods.ordinal import OrdinalProbit
from relaxep.likelihoods.poisson import Poisson
from relaxep.likelihoods.quadrature import QuadratureLikelihood
from relaxep.likelihoods.student_t import StudentT
from relaxep.likelihoods.survival import SurvivalLikelihood
from relaxep.likelihoods.survival_targets import interval_censored, right_censored
from relaxep.likelihoods.tobit import Tobit
from relaxep.likelihoods.two_latent import TwoLatentLikelihood

__all__ = [
    "BinaryLikelihood",
    "CoxPH",
    "Gaussian",
    "Heteroscedastic",
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
    "StudentT",
    "SurvivalLikelihood",
    "TiltedLogZ",
    "Tobit",
    "TwoLatentLikelihood",
    "WeibullAFT",
    "interval_censored",
    "right_censored",
]
