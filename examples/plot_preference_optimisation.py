"""
Preferential optimisation: finding the best item from comparisons alone
=======================================================================

A person can say which of two designs they prefer but not score either.  Each round below asks one comparison:
the incumbent (the item with the highest posterior mean utility so far) against a challenger, the candidate
whose duel with the incumbent has the highest expected information gain (BALD, in closed form from the EP
posterior: :meth:`~relaxep.GPPreferenceLearner.information_gain`) among the candidates with the highest upper
confidence bound of the utility.  The answers come from a hidden utility with probit noise.  After 25 rounds
the incumbent sits near the utility's maximum.  Drawn: the utility relative to the incumbent,
:math:`f(x) - f(x_{inc})`, which is what comparisons identify, with two posterior standard deviations (from
:meth:`~relaxep.GPPreferenceLearner.difference_mean_and_variance`); the hidden utility rescaled to the comparison
noise's units.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from relaxep import GPPreferenceLearner


def hidden_utility(x):
    return np.sin(6.0 * x[:, 0]) + 0.6 * np.cos(17.0 * x[:, 0]) * x[:, 0]


rng = np.random.default_rng(0)
items = rng.random((4, 1))  # four random designs, compared in three pairs to start
comparisons = []
for a, b in [(0, 1), (1, 2), (2, 3)]:
    noisy = hidden_utility(items[[a, b]]) + 0.1 * rng.standard_normal(2)
    comparisons.append((a, b) if noisy[0] > noisy[1] else (b, a))

candidates = np.linspace(0.0, 1.0, 201)[:, None]
for _ in range(25):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a few rounds learn a hyperparameter at its bound)
        model = GPPreferenceLearner(random_state=0).fit(items, np.array(comparisons))
    incumbent = int(np.argmax(model.predict(items)))
    mean, sd = model.predict(candidates, return_std=True)
    top = np.argsort(-(mean + 2.0 * sd))[:20]  # the 20 most promising candidates
    pool = np.vstack([items[incumbent], candidates[top]])
    duels = np.column_stack([np.zeros(20, dtype=int), np.arange(1, 21)])
    best_duel, _ = model.rank_pairs(pool, duels, n_best=1)
    challenger = pool[best_duel[0, 1]]
    items = np.vstack([items, challenger])
    a, b = incumbent, len(items) - 1
    noisy = hidden_utility(items[[a, b]]) + 0.1 * rng.standard_normal(2)
    comparisons.append((a, b) if noisy[0] > noisy[1] else (b, a))

# the utility relative to the incumbent, f(x) - f(incumbent): what the comparisons identify (the common level is
# the prior's and wide), with its two-sd band
incumbent = int(np.argmax(model.predict(items)))
pool = np.vstack([candidates, items[incumbent]])
duels = np.column_stack([np.arange(len(candidates)), np.full(len(candidates), len(candidates))])
mean, var = model.difference_mean_and_variance(pool, duels)
sd = np.sqrt(var)
truth = hidden_utility(candidates) - hidden_utility(items[[incumbent]])
scale = float(truth @ mean / (truth @ truth))  # (the utility is learned in units of the comparison noise)
fig, ax = plt.subplots(figsize=(7.0, 3.6))
ax.plot(candidates[:, 0], scale * truth, color="black", lw=1.5, label="hidden utility (rescaled)")
ax.plot(candidates[:, 0], mean, color="tab:blue", lw=1.5, label="posterior mean, relative to the incumbent")
ax.fill_between(candidates[:, 0], mean - 2 * sd, mean + 2 * sd, color="tab:blue", alpha=0.2)
ax.scatter(items[:, 0], np.interp(items[:, 0], candidates[:, 0], mean), s=12, color="tab:orange", zorder=3,
           label="items compared")  # fmt: skip
ax.axvline(items[incumbent, 0], color="tab:green", ls="--", lw=1.0, label=f"incumbent x = {items[incumbent, 0]:.3f}")
ax.axvline(candidates[np.argmax(truth), 0], color="0.5", ls=":", lw=1.0, label="true maximum")
ax.set_xlabel("design x")
ax.set_ylabel("f(x) - f(incumbent)")
ax.set_title(f"{len(comparisons)} comparisons, EP evidence {model.log_marginal_likelihood_value_:.1f}", fontsize=9)
ax.legend(fontsize=7, loc="lower left")
fig.tight_layout()
plt.show()
