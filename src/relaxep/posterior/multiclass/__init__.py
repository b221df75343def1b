r"""Joint multi-class posteriors: one representation per likelihood, the same calls on each.

* :class:`NestedPosterior` (:mod:`~relaxep.posterior.multiclass.nested`): nested EP for the
  multinomial probit, :math:`O(C n^3)` a sweep;
* :class:`SparseNestedPosterior` (:mod:`~relaxep.posterior.multiclass.sparse_nested`): nested EP under a
  low-rank prior :math:`f_c = \Phi v_c`, :math:`O(n C^2 m^2)` a sweep;
* :class:`RobustMaxPosterior` (:mod:`~relaxep.posterior.multiclass.robust_max`): dense EP on the
  label differences for the robust max, :math:`O(n^3 (C-1)^3)` a sweep;
* :mod:`relaxep.likelihoods.orthant`: the inner EP (Gaussian expectations of products of probit
  or step factors) that nested EP and the likelihoods' tilted moments run.

:func:`relaxep.inference.damped_parallel.damped_parallel_ep` runs either.
"""

from relaxep.likelihoods.multiclass import difference_matrices, other_classes
from relaxep.posterior.multiclass.base import JointPosterior, Proposal
from relaxep.posterior.multiclass.nested import NestedPosterior
from relaxep.posterior.multiclass.robust_max import RobustMaxPosterior
from relaxep.posterior.multiclass.sparse_nested import SparseNestedPosterior

__all__ = [
    "JointPosterior",
    "NestedPosterior",
    "Proposal",
    "RobustMaxPosterior",
    "SparseNestedPosterior",
    "difference_matrices",
    "other_classes",
]
