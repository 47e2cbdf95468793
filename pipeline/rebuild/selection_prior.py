"""Estimated true selection frequencies: a prior fitted by maximum likelihood, and posterior means.

An image shown to ``n`` annotators of whom ``k`` selected it has observed selection frequency
``k / n``; with ``n = 10`` that is a noisy estimate of its true frequency ``p``. The originals
were already filtered by an earlier vote, so their ``p`` are high and one observed at 0.7 is
probably truly higher; the candidates are unfiltered, so one observed at 0.7 is probably truly
lower. Matching the two groups' histograms of *observed* frequencies (MatchedFrequency) thus
picks candidates that are truly harder than the originals they match (Engstrom et al. 2020).

The correction (``sample --match-on posterior``): fit a prior ``g`` for ``p`` to each group's
observed counts separately, by maximum likelihood of the marginal
``P(k | n) = ∫ Binomial(k; n, p) g(p) dp``, and replace every image's observed frequency by its
posterior mean ``E[p | k, n]`` under its group's prior; the rule then bins those. Two priors:

* ``mixture`` (default): a discrete distribution on a grid of :data:`GRID_POINTS` values of
  ``p`` in [0, 1], its weights fitted by EM (the nonparametric maximum-likelihood estimate:
  it follows a filtered, lopsided distribution);
* ``beta-binomial``: ``g = Beta(α, β)``, ``α`` and ``β`` fitted by L-BFGS on log scale; the
  posterior mean is ``(α + k) / (α + β + n)``.

What it assumes: given ``p``, an image's ``k`` annotators answer independently with the same
probability ``p`` (a binomial count; annotators do not differ); within a group all images share
one prior (pooled over classes: a class whose images are harder than the group's are shrunk
toward the group); the annotations of originals and candidates are collected the same way; and
a candidate's true frequency means for the new set what an original's means for the original
set. It corrects the *selection* on noise, not a shift of what the frequency measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

PRIORS = ("mixture", "beta-binomial")
MATCH_ON = ("observed", "posterior")
GRID_POINTS = 101
EM_ITERATIONS = 2_000
EM_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Prior:
    """A fitted prior for true selection frequencies: ``kind`` and its parameters, and the fit's log-likelihood."""

    kind: str
    log_likelihood: float
    n_images: int
    alpha: Optional[float] = None  # beta-binomial
    beta: Optional[float] = None
    support: Optional[np.ndarray] = None  # mixture: grid of p
    weights: Optional[np.ndarray] = None

    @property
    def mean(self) -> float:
        if self.kind == "beta-binomial":
            return self.alpha / (self.alpha + self.beta)
        return float(np.dot(self.support, self.weights))

    def summary(self) -> dict:
        """The fit as plain JSON values (for a sampling report)."""
        out = {"kind": self.kind, "n_images": self.n_images, "log_likelihood": self.log_likelihood, "mean": self.mean}
        if self.kind == "beta-binomial":
            return out | {"alpha": self.alpha, "beta": self.beta}
        heavy = np.flatnonzero(self.weights > 1e-3)
        return out | {"support": [float(self.support[i]) for i in heavy], "weights": [float(self.weights[i]) for i in heavy]}


def counts(selection_frequency, num_annotations) -> tuple[np.ndarray, np.ndarray]:
    """Integer ``(k, n)`` from observed frequencies ``k / n`` and annotation counts ``n``.

    >>> k, n = counts([0.7, 0.25, 0.0], [10, 4, 0])
    >>> k.tolist(), n.tolist()
    ([7, 1, 0], [10, 4, 0])
    """
    n = np.asarray(num_annotations, np.int64)
    frequency = np.asarray(selection_frequency, float)
    if frequency.shape != n.shape:
        raise ValueError(f"need one annotation count per selection frequency; got {n.shape} and {frequency.shape}")
    if np.any(n < 0) or np.any((frequency < 0) | (frequency > 1)):
        raise ValueError("selection frequencies must lie in [0, 1] and annotation counts be >= 0")
    return np.rint(frequency * n).astype(np.int64), n


def _unique_pairs(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs, multiplicity = np.unique(np.stack([k, n], axis=1), axis=0, return_counts=True)
    return pairs[:, 0], pairs[:, 1], multiplicity.astype(float)


def _binomial_log_kernel(k: np.ndarray, n: np.ndarray, support: np.ndarray) -> np.ndarray:
    """log P(k | n, p) for every pair (rows) and grid value (columns)."""
    from scipy.stats import binom

    return binom.logpmf(k[:, None], n[:, None], support[None, :])


def fit_mixture(k, n, grid_points: int = GRID_POINTS) -> Prior:
    """The discrete prior on a grid of ``p`` maximising the marginal likelihood of the counts (EM).

    >>> rng = np.random.default_rng(0)
    >>> p = rng.choice([0.3, 0.9], 4000)
    >>> prior = fit_mixture(rng.binomial(10, p), np.full(4000, 10))
    >>> round(prior.mean, 2), round(float(prior.weights[prior.support > 0.6].sum()), 1)
    (0.6, 0.5)
    """
    k, n = np.asarray(k, np.int64), np.asarray(n, np.int64)
    uk, un, m = _unique_pairs(k, n)
    support = np.linspace(0.0, 1.0, grid_points)
    log_kernel = _binomial_log_kernel(uk, un, support)
    kernel = np.exp(log_kernel - log_kernel.max(axis=1, keepdims=True))
    weights = np.full(grid_points, 1.0 / grid_points)
    previous = -np.inf
    for _ in range(EM_ITERATIONS):
        marginal = kernel @ weights
        log_likelihood = float(np.dot(m, np.log(marginal) + log_kernel.max(axis=1)))
        weights = weights * ((m / marginal) @ kernel) / m.sum()
        if log_likelihood - previous < EM_TOLERANCE * abs(log_likelihood):
            break
        previous = log_likelihood
    return Prior("mixture", log_likelihood, int(m.sum()), support=support, weights=weights / weights.sum())


def fit_beta_binomial(k, n) -> Prior:
    """``Beta(α, β)`` maximising the beta-binomial likelihood of the counts.

    >>> rng = np.random.default_rng(1)
    >>> prior = fit_beta_binomial(rng.binomial(10, rng.beta(4.0, 2.0, 20_000)), np.full(20_000, 10))
    >>> round(prior.alpha, 1), round(prior.beta, 1)
    (4.0, 2.0)
    """
    from scipy.optimize import minimize
    from scipy.stats import betabinom

    uk, un, m = _unique_pairs(np.asarray(k, np.int64), np.asarray(n, np.int64))

    def negative(log_ab):
        return -float(np.dot(m, betabinom.logpmf(uk, un, *np.exp(log_ab))))

    mean = float(np.dot(m, uk / un) / m.sum())
    start = np.log(np.clip([2 * mean, 2 * (1 - mean)], 1e-2, None))
    best = minimize(negative, start, method="L-BFGS-B", bounds=[(-7, 9), (-7, 9)])
    alpha, beta = np.exp(best.x)
    return Prior("beta-binomial", -float(best.fun), int(m.sum()), alpha=float(alpha), beta=float(beta))


def fit_prior(k, n, kind: str = "mixture") -> Prior:
    """Fit a prior of ``kind`` (:data:`PRIORS`) to counts ``k`` of ``n`` (images with ``n = 0`` are left out)."""
    if kind not in PRIORS:
        raise ValueError(f"unknown selection prior {kind!r}; choose one of {', '.join(PRIORS)}")
    k, n = np.asarray(k, np.int64), np.asarray(n, np.int64)
    shown = n > 0
    if shown.sum() < 2:
        raise ValueError(f"a selection-frequency prior needs at least 2 annotated images; got {int(shown.sum())}")
    return fit_mixture(k[shown], n[shown]) if kind == "mixture" else fit_beta_binomial(k[shown], n[shown])


def posterior_mean(prior: Prior, k, n) -> np.ndarray:
    """``E[p | k, n]`` under ``prior``, per image (an image with ``n = 0`` gets the prior mean).

    >>> prior = Prior("beta-binomial", 0.0, 1, alpha=2.0, beta=1.0)
    >>> posterior_mean(prior, [7, 0], [10, 0]).round(4).tolist()
    [0.6923, 0.6667]
    """
    k, n = np.asarray(k, np.int64), np.asarray(n, np.int64)
    if prior.kind == "beta-binomial":
        return (prior.alpha + k) / (prior.alpha + prior.beta + n)
    uk, un = np.unique(np.stack([k, n], axis=1), axis=0).T
    log_kernel = _binomial_log_kernel(uk, un, prior.support)
    kernel = np.exp(log_kernel - log_kernel.max(axis=1, keepdims=True)) * prior.weights[None, :]
    means = (kernel @ prior.support) / kernel.sum(axis=1)
    position = {(a, b): i for i, (a, b) in enumerate(zip(uk.tolist(), un.tolist()))}
    return means[[position[(a, b)] for a, b in zip(k.tolist(), n.tolist())]]


def debiased_frequencies(
    originals_sf, originals_n, candidates_sf, candidates_n, *,
    kind: str = "mixture", min_annotations_originals: int = 1, min_annotations_candidates: int = 1,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Posterior-mean selection frequencies of the originals and of the candidates, each under its own prior.

    Each prior is fitted to the images of its group with at least the given number of
    annotations (those the rule can use). Returns ``(originals, candidates, summary)``.
    """
    ok, on = counts(originals_sf, originals_n)
    ck, cn = counts(candidates_sf, candidates_n)
    use_o, use_c = on >= max(1, min_annotations_originals), cn >= max(1, min_annotations_candidates)
    prior_o = fit_prior(ok[use_o], on[use_o], kind)
    prior_c = fit_prior(ck[use_c], cn[use_c], kind)
    summary = {"originals": prior_o.summary(), "candidates": prior_c.summary()}
    return posterior_mean(prior_o, ok, on), posterior_mean(prior_c, ck, cn), summary


def posterior_inputs(config, candidates, originals):
    """What the sample stage hands MatchedFrequency: observed frequencies, or posterior means when asked.

    ``config`` is a :class:`~pipeline.rebuild.revision.SamplingConfig`; ``candidates`` and
    ``originals`` are dataclasses with ``selection_frequency`` and ``num_annotations`` arrays.
    Returns ``(candidates, originals, prior summary or None)``; the inputs are not changed.
    """
    import dataclasses

    if config.rule != "matched-frequency" or config.match_on == "observed":
        return candidates, originals, None
    originals_mean, candidates_mean, summary = debiased_frequencies(
        originals.selection_frequency, originals.num_annotations, candidates.selection_frequency, candidates.num_annotations,
        kind=config.selection_prior, min_annotations_originals=config.min_num_annotations_val,
        min_annotations_candidates=config.min_num_annotations_candidates,
    )
    return (dataclasses.replace(candidates, selection_frequency=candidates_mean),
            dataclasses.replace(originals, selection_frequency=originals_mean), summary)
