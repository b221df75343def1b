"""Moved to :mod:`relaxep.posterior.sparse_gradient` (the sparse representation's evidence gradient)."""

from relaxep.posterior.sparse_gradient import (  # noqa: F401
    SparseKernel,
    as_sparse_kernel,
    finish_gradient,
    gradient_broadcast,
    shard_gradient,
    sparse_evidence_gradient,
)
