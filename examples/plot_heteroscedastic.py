"""
Noise that changes with the input: the motorcycle crash data
============================================================

Head acceleration after a simulated motorcycle impact (Silverman 1985; 133 readings): quiet for the first 14 ms,
then violent, then settling.  :class:`~relaxep.GPHeteroscedasticRegressor` gives the log noise variance its own
Gaussian process and fits both by EP; its 90% predictive band is narrow before the impact and wide after it.
A regression with one noise level (scikit-learn's ``GaussianProcessRegressor`` with a ``WhiteKernel``) spreads
the same noise over both.  Below: the two bands, and the learned noise standard deviation with its posterior
uncertainty.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from relaxep import GPHeteroscedasticRegressor
from relaxep.datasets import load_mcycle

times, accel = load_mcycle()
X = times[:, None]
grid = np.linspace(times.min(), times.max(), 300)[:, None]

model = GPHeteroscedasticRegressor(random_state=0).fit(X, accel)
low, high = model.predict_interval(grid, level=0.9)
noise, noise_sd = model.predict_noise(grid, return_std=True)
gpr = GaussianProcessRegressor(C(1.0) * RBF(10.0) + WhiteKernel(), normalize_y=True).fit(X, accel)
g_mean, g_sd = gpr.predict(grid, return_std=True)

fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 6.0), sharex=True, height_ratios=(2, 1))
top.scatter(times, accel, s=8, color="0.35", label="readings")
top.plot(grid[:, 0], model.predict(grid), color="tab:blue", label="heteroscedastic GP (EP): mean")
top.fill_between(grid[:, 0], low, high, color="tab:blue", alpha=0.2, label="its 90% predictive band")
top.plot(grid[:, 0], g_mean - 1.645 * g_sd, color="tab:orange", ls="--", lw=1.0, label="one-noise GPR: 90% band")
top.plot(grid[:, 0], g_mean + 1.645 * g_sd, color="tab:orange", ls="--", lw=1.0)
top.set_ylabel("acceleration (g)")
top.legend(fontsize=7, loc="lower right")
bottom.plot(grid[:, 0], noise, color="tab:blue", label="noise sd, posterior mean")
bottom.fill_between(grid[:, 0], np.maximum(noise - 2 * noise_sd, 0.0), noise + 2 * noise_sd, color="tab:blue",
                    alpha=0.2, label="two posterior sd")  # fmt: skip
bottom.axhline(np.sqrt(gpr.kernel_.k2.noise_level) * np.std(accel), color="tab:orange", ls="--", lw=1.0,
               label="one-noise GPR's noise sd")  # fmt: skip
bottom.set_xlabel("time after impact (ms)")
bottom.set_ylabel("noise sd (g)")
bottom.legend(fontsize=7, loc="upper right")
fig.tight_layout()
plt.show()
