r"""Sparse EP beyond one machine: ``DaskGPClassifier``, ``DaskGPRegressor`` and ``DaskGPSurvivalRegressor`` on Dask
arrays whose row chunks stay on the workers.

Following the conventions of LightGBM's and XGBoost's Dask estimators: ``client=None`` uses
the default client (``distributed.default_client()``); ``fit`` takes Dask arrays (numpy is
accepted and scattered); the predictions return a lazy Dask array for a Dask array; ``to_local()``
returns the fitted single-process estimator (``GPClassifier``, ``GPRegressor``) for pickling and serving,
whose predictions these are (:mod:`relaxep.estimators._dask_fit`).

The posterior is the FITC posterior of :mod:`relaxep.posterior.sparse` with the parallel
schedule of :class:`~relaxep.inference.schedules.Parallel`, reorganised so that nothing of size
:math:`n` leaves a worker.  Each shard (one row chunk) holds its inputs, labels,
:math:`V_s^\top = K_{s,u}L_{uu}^{-\top}`, :math:`g_s` (both from
:func:`~relaxep.posterior.fitc_rows.sparse_prior_rows`, as ``SparsePrior`` builds its own),
its sites and its last proposals.  The shards run the same pure block functions as the
single-process sweep; one sweep is one map and one reduce:

1. **map** (broadcast :math:`L_B^{-1}`, :math:`m` and the current step :math:`s`, :math:`O(M^2)`): the
   candidate sites of the last reduce become the shard's sites; the shard's marginals
   (:func:`~relaxep.posterior.fitc_rows.shard_marginals`), the convergence statistic
   against its previous marginals (:func:`~relaxep.inference.method.marginal_change`), its
   terms of the EP evidence (:func:`~relaxep.inference.evidence.site_evidence_terms`), the
   rule's proposals (:func:`~relaxep.inference.schedules.parallel_proposals`), and, computed ahead
   at :math:`s`, the next candidate sites :math:`\tau + s(\tau^* - \tau)` and their
   natural-parameter sums :math:`\sum_i w_i v_iv_i^\top` (:math:`M \times M`),
   :math:`\sum_i\beta_i v_i` (:math:`M`), :math:`\sum_i\log d_i`; back come those sums and scalars
   (largest change, counts of improper cavities, the inner products of the damping rule, the evidence
   terms' sum);
2. **reduce** on the client, in shard order: :math:`B = I + \sum_s C_s`, its Cholesky factor and
   :math:`m = B^{-1}b`.  The step is the parallel schedule's
   :class:`~relaxep.inference.schedules.AdaptiveStep`; where it changes the step (it damps an
   oscillation), or :math:`B` is improper (the step is halved), a second map computes the sums at the
   new step.  The statistic goes to a :class:`~relaxep.inference.ledger.SweepLedger`.

So the traffic per sweep is :math:`O(M^2)` per shard, never :math:`O(n)`, in one round trip, and the iterates
are those of ``GPClassifier(..., inducing_points=..., schedule="parallel")`` (``GPRegressor``'s for the
regressor) with the same site rule (summation order aside): the fit equals the single-process one, and so
do the predictions.  The partial sums are reduced in shard order, so the answer does not depend on the
number of workers (:mod:`relaxep.inference.sharded`).  Learning the
kernel and the inducing inputs either runs on the client on ``optimizer_subset`` rows drawn
from the cluster (the single-process code on the same rows), or, with
``optimizer_subset=None``, on all shards: each evaluation of the evidence rebuilds the shards'
prior rows (a map), runs EP on them (warm-started from the last converged sites, as
``GPClassifier`` does) and maps the gradient (:mod:`relaxep.posterior.sparse_gradient`; back
come :math:`M \times M`, :math:`M \times d` and scalars per shard; the likelihood's hyperparameters, a
Student-t's scale say, are learned with the kernel's).

Pointing it at an existing cluster::

    from dask.distributed import Client
    client = Client("tcp://scheduler:8786")
    clf = DaskGPClassifier(client=client, inducing_points=200).fit(X, y)  # X, y: dask arrays
"""

from relaxep.estimators.dask_classifier import DaskGPClassifier
from relaxep.estimators.dask_regressor import DaskGPRegressor
from relaxep.estimators.dask_survival import DaskGPSurvivalRegressor

__all__ = ["DaskGPClassifier", "DaskGPRegressor", "DaskGPSurvivalRegressor"]
