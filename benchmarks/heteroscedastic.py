"""Heteroscedastic regression on mcycle: ``GPHeteroscedasticRegressor`` (EP) beside GPflow's heteroscedastic SVGP.

``python benchmarks/heteroscedastic.py [--folds 10] [--out FILE]``

The protocol of ``relaxep reproduce heteroscedastic``: MASS's mcycle (133 rows), ``KFold(10, shuffle=True,
random_state=0)``, time and acceleration standardised on each training fold; per method the held-out rows' mean
NLPD (standardised units of y) and RMSE, each averaged over the folds, the RMSE pooled over all held-out rows,
and the median fit time.  Both models use two latent GPs with squared-exponential kernels.

* relaxep: ``GPHeteroscedasticRegressor()`` with its defaults (dense at 133 rows; kernels and the noise mean
  learned by the EP evidence).
* GPflow (where it imports: a benchmark environment, ``pip install gpflow tensorflow-cpu tensorflow-probability
  tf-keras``; never a relaxep dependency): the model of GPflow's heteroscedastic notebook,
  ``SVGP(SeparateIndependent([SquaredExponential(), SquaredExponential()]),
  HeteroskedasticTFPConditional(Normal, scale=Exp()))`` with the inducing inputs at every training input (so the
  only approximation is the Gaussian variational posterior), trained by L-BFGS (``gpflow.optimizers.Scipy``) on
  the ELBO; its NLPD from ``predict_log_density`` (quadrature over both latents), its mean from ``predict_y``.

BLAS threads are pinned to ``--threads`` for both (and TensorFlow's intra-op threads).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from relaxep import GPHeteroscedasticRegressor
from relaxep.datasets import load_mcycle


def folds(n_folds: int):
    times, accel = load_mcycle()
    for train, test in KFold(n_folds, shuffle=True, random_state=0).split(times):
        (mx, sx), (my, sy) = (times[train].mean(), times[train].std()), (accel[train].mean(), accel[train].std())
        X, Xt = ((times[train] - mx) / sx)[:, None], ((times[test] - mx) / sx)[:, None]
        yield X, (accel[train] - my) / sy, Xt, (accel[test] - my) / sy


def fit_relaxep(X, y, Xt, yt) -> tuple[float, np.ndarray, np.ndarray]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GPHeteroscedasticRegressor(random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
    return seconds, model.log_predictive_density(Xt, yt), model.predict(Xt)


def fit_gpflow(X, y, Xt, yt) -> tuple[float, np.ndarray, np.ndarray]:
    import gpflow
    import tensorflow_probability as tfp

    start = time.perf_counter()
    likelihood = gpflow.likelihoods.HeteroskedasticTFPConditional(
        distribution_class=tfp.distributions.Normal, scale_transform=tfp.bijectors.Exp()
    )
    kernel = gpflow.kernels.SeparateIndependent(
        [gpflow.kernels.SquaredExponential(), gpflow.kernels.SquaredExponential()]
    )
    inducing = gpflow.inducing_variables.SeparateIndependentInducingVariables(
        [gpflow.inducing_variables.InducingPoints(X.copy()), gpflow.inducing_variables.InducingPoints(X.copy())]
    )
    model = gpflow.models.SVGP(kernel, likelihood, inducing, num_latent_gps=likelihood.latent_dim)
    gpflow.set_trainable(model.inducing_variable, False)
    data = (X, y[:, None])
    gpflow.optimizers.Scipy().minimize(model.training_loss_closure(data), model.trainable_variables,
                                       options={"maxiter": 2000})  # fmt: skip
    seconds = time.perf_counter() - start
    log_density = model.predict_log_density((Xt, yt[:, None])).numpy().ravel()
    mean = model.predict_y(Xt)[0].numpy().ravel()
    return seconds, log_density, mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    methods = {"relaxep GPHeteroscedasticRegressor() (EP)": fit_relaxep}
    try:
        import gpflow
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        methods["GPflow SVGP, HeteroskedasticTFPConditional (VI), Z = X"] = fit_gpflow
        peers = f"GPflow {gpflow.__version__}, TensorFlow {tf.__version__}"
    except ImportError:
        peers = "GPflow not installed: no GPflow row"
    results: dict[str, list] = {name: [] for name in methods}
    with threadpool_limits(args.threads):
        for X, y, Xt, yt in folds(args.folds):
            for name, fit in methods.items():
                seconds, log_density, mean = fit(X, y, Xt, yt)
                results[name].append((seconds, -np.mean(log_density), np.sqrt(np.mean((mean - yt) ** 2)),
                                      np.sum((mean - yt) ** 2), yt.size))  # fmt: skip
    lines = [
        f"mcycle, {args.folds}-fold CV as `relaxep reproduce heteroscedastic` ({peers}; {args.threads} threads each).",
        "",
        "| method | NLPD (fold mean) | RMSE (fold mean) | RMSE (pooled) | fit (s), median |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rows in results.items():
        r = np.array(rows)
        pooled = np.sqrt(r[:, 3].sum() / r[:, 4].sum())
        lines.append(
            f"| {name} | {r[:, 1].mean():.3f} | {r[:, 2].mean():.3f} | {pooled:.3f} | {np.median(r[:, 0]):.2f} |"
        )
    lines += ["", f"Command: `python benchmarks/heteroscedastic.py --folds {args.folds} --threads {args.threads}`"]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
