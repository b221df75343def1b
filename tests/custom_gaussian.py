"""A user-written likelihood: Gaussian noise, in one file, with nothing else of relaxep touched.

The user guide's "Writing a likelihood" page shows this file; ``tests/test_custom_likelihood.py``
checks that EP on it is exact GP regression.
"""

import numpy as np

from relaxep.likelihoods import Likelihood, TiltedLogZ


class Gaussian(Likelihood):
    r""":math:`p(y | f) = N(y | f, \sigma^2)`; ``log Z`` of :math:`p^u N(f | \mu, s^2)` in closed form."""

    def __init__(self, noise_var: float = 0.1) -> None:
        self.noise_var = noise_var

    def _log_z(self, y, mean, var, power):
        # p^u = (2 pi sigma^2)^((1-u)/2) u^(-1/2) N(y | f, sigma^2 / u)
        total = var + self.noise_var / power
        resid = y - mean
        log_z = -0.5 * (np.log(2 * np.pi * total) + resid**2 / total)
        log_z += 0.5 * (1 - power) * np.log(2 * np.pi * self.noise_var) - 0.5 * np.log(power)
        return TiltedLogZ(log_z, resid / total, np.broadcast_to(-1.0 / total, np.shape(log_z)))

    def _log_lik(self, y, f):
        return -0.5 * (np.log(2 * np.pi * self.noise_var) + (y - f) ** 2 / self.noise_var)
