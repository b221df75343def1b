"""Studies (the paper's toy, synthetic and UCI experiments; robustness, multi-class, regression), cached and reported.

Run them with ``relaxep reproduce toy|synthetic|uci|all|robustness|multiclass|regression|ordinal|counts|censored
|heteroscedastic|modelcomparison|survival|constrained_bo|likelihoods|markov|monotone --out DIR`` or
:func:`relaxep.experiments.reproduce.reproduce`.  :data:`STUDIES` is the registry: a new study
is a module in :mod:`relaxep.experiments.studies` exposing a :class:`~relaxep.experiments.study.Study`,
added here.
"""

from __future__ import annotations

from relaxep.experiments.studies import (
    censored,
    constrained_bo,
    counts,
    heteroscedastic,
    likelihoods,
    markov,
    modelcomparison,
    monotone,
    multiclass,
    ordinal,
    regression,
    robustness,
    survival,
    synthetic,
    toy,
    uci,
)
from relaxep.experiments.study import Study

__all__ = ["PAPER_STUDIES", "STUDIES", "Study"]

#: every study by name, in report order
STUDIES: dict[str, Study] = {
    study.name: study
    for study in (
        toy.STUDY,
        synthetic.STUDY,
        uci.STUDY,
        robustness.STUDY,
        multiclass.STUDY,
        regression.STUDY,
        ordinal.STUDY,
        counts.STUDY,
        censored.STUDY,
        heteroscedastic.STUDY,
        modelcomparison.STUDY,
        survival.STUDY,
        constrained_bo.STUDY,
        likelihoods.STUDY,
        markov.STUDY,
        monotone.STUDY,
    )
}

#: the paper's studies, which ``relaxep reproduce all`` runs
PAPER_STUDIES: tuple[str, ...] = tuple(name for name, study in STUDIES.items() if study.paper)
