"""Debiased matching: priors fitted by maximum likelihood, posterior means, `sample --match-on posterior`.

References: the beta-binomial MLE is checked by its zero gradient (finite differences of
scipy's betabinom log-likelihood) and by recovering known parameters; posterior means against
numerical integration (scipy.integrate.quad) of Binomial(k; n, p) g(p); the correction against
the simulator, where the true selection frequencies are known.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers_rebuild import A, cid, pool_with, val
from scipy.integrate import quad
from scipy.stats import beta as beta_dist
from scipy.stats import betabinom, binom

from pipeline.rebuild import selection_prior as S
from pipeline.rebuild.revision import SamplingConfig, revision_from_json
from pipeline.rebuild.sample import sample_revision


def test_beta_binomial_is_the_maximum_likelihood_fit():
    rng = np.random.default_rng(0)
    n = rng.integers(8, 13, 5000)
    k = rng.binomial(n, rng.beta(3.0, 1.5, 5000))
    prior = S.fit_prior(k, n, "beta-binomial")

    def log_likelihood(a, b):
        return betabinom.logpmf(k, n, a, b).sum()

    assert prior.log_likelihood == pytest.approx(log_likelihood(prior.alpha, prior.beta), rel=1e-9)
    for da, db in ((1e-3, 0), (0, 1e-3), (-1e-3, 0), (0, -1e-3)):  # no step uphill
        assert log_likelihood(prior.alpha * (1 + da), prior.beta * (1 + db)) <= prior.log_likelihood + 1e-6
    assert prior.alpha == pytest.approx(3.0, rel=0.2) and prior.beta == pytest.approx(1.5, rel=0.2)


def test_mixture_beats_a_beta_on_a_filtered_distribution():
    # true frequencies of images that passed a majority vote of 10: lopsided, not a beta
    rng = np.random.default_rng(1)
    p = rng.uniform(0.05, 0.95, 40_000)
    p = p[rng.binomial(10, p) >= 6][:8000]
    k = rng.binomial(10, p)
    n = np.full(len(k), 10)
    mixture, beta = S.fit_prior(k, n, "mixture"), S.fit_prior(k, n, "beta-binomial")
    assert mixture.log_likelihood >= beta.log_likelihood - 1e-6
    assert mixture.weights.sum() == pytest.approx(1.0) and mixture.mean == pytest.approx(p.mean(), abs=0.02)


def test_posterior_means_against_numerical_integration():
    prior = S.Prior("beta-binomial", 0.0, 1, alpha=2.5, beta=1.2)
    for k, n in ((7, 10), (0, 10), (10, 10), (3, 4)):
        num = quad(lambda p: p * binom.pmf(k, n, p) * beta_dist.pdf(p, 2.5, 1.2), 0, 1)[0]
        den = quad(lambda p: binom.pmf(k, n, p) * beta_dist.pdf(p, 2.5, 1.2), 0, 1)[0]
        assert S.posterior_mean(prior, [k], [n])[0] == pytest.approx(num / den, rel=1e-7)
    support, weights = np.array([0.2, 0.5, 0.9]), np.array([0.3, 0.3, 0.4])
    mixture = S.Prior("mixture", 0.0, 1, support=support, weights=weights)
    like = weights * binom.pmf(7, 10, support)
    assert S.posterior_mean(mixture, [7], [10])[0] == pytest.approx(np.dot(like, support) / like.sum(), rel=1e-12)


def test_posteriors_move_originals_up_and_candidates_down():
    # the worked example's point: at the same observed 0.7, a filtered original is truly higher
    rng = np.random.default_rng(2)
    originals_p = rng.beta(6, 1.5, 4000)
    candidates_p = rng.beta(1.5, 1.2, 20_000)
    o_sf, c_sf = rng.binomial(10, originals_p) / 10, rng.binomial(10, candidates_p) / 10
    o_mean, c_mean, summary = S.debiased_frequencies(o_sf, np.full(4000, 10), c_sf, np.full(20_000, 10))
    at_07_original, at_07_candidate = o_mean[o_sf == 0.7][0], c_mean[c_sf == 0.7][0]
    assert at_07_original > 0.7 > at_07_candidate
    assert set(summary) == {"originals", "candidates"} and summary["originals"]["kind"] == "mixture"


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown selection prior"):
        S.fit_prior([1, 2], [10, 10], "normal")
    with pytest.raises(ValueError, match="at least 2 annotated"):
        S.fit_prior([0], [0])
    with pytest.raises(ValueError, match="matched-frequency rule only"):
        SamplingConfig(rule="top-images", seed=0, match_on="posterior")
    with pytest.raises(ValueError, match="match_on"):
        SamplingConfig(rule="matched-frequency", seed=0, match_on="true")


def test_the_correction_moves_the_simulated_change_toward_zero():
    from pipeline.toys.simulate import simulate

    rows = simulate([0, 1], [("MatchedFrequency", 10), ("MF-posterior", 10)])
    observed, posterior = rows
    assert observed["change_mean"] < -1.0  # the bias: a harder new set
    assert abs(posterior["change_mean"]) < 0.5 * abs(observed["change_mean"])
    assert abs(posterior["true_sf_new"] - posterior["true_sf_original"]) < abs(observed["true_sf_new"] - observed["true_sf_original"])


def _pool():
    rng = np.random.default_rng(4)
    originals = [(val(i), A, 10, int(rng.binomial(10, rng.beta(8, 1.5)))) for i in range(40)]
    candidates = [(cid(i), A, 10, int(rng.binomial(10, rng.beta(1.5, 1.0)))) for i in range(400)]
    return pool_with(candidates, originals)


@pytest.mark.parametrize("prior", ["mixture", "beta-binomial"])
def test_sample_on_posterior_records_the_setting_and_regenerates(prior):
    pool, sf = _pool()
    config = SamplingConfig(rule="matched-frequency", seed=3, per_class=10, wnids=(A,), min_num_val_images_per_wnid=5,
                            match_on="posterior", selection_prior=prior)
    out = sample_revision(pool, sf, config, output_filename="r.json", time_string="t", username="u")
    data = out.revision.to_json()
    assert data["match_on"] == "posterior" and data["selection_prior"] == prior
    assert list(data)[-3:] == ["match_on", "selection_prior", "output_filename"]
    again = revision_from_json(data)
    assert again.config == config
    assert sample_revision(pool, sf, again.config, output_filename="r.json", time_string="t", username="u").revision == out.revision
    assert out.report["selection_prior"]["originals"]["kind"] == prior
    assert out.report["set_histogram"] == out.report["target_histogram"] and out.revision.is_valid
    observed = sample_revision(pool, sf, SamplingConfig(rule="matched-frequency", seed=3, per_class=10, wnids=(A,),
                                                        min_num_val_images_per_wnid=5), output_filename="o.json")
    assert "match_on" not in observed.revision.to_json() and "selection_prior" not in observed.report
    # the corrected set asks for more observed-high images than the uncorrected one
    assert out.report["mean_selection_frequency"]["set"] >= observed.report["mean_selection_frequency"]["set"]


def test_sample_command_option():
    from pipeline.__main__ import build_parser
    from pipeline.commands.sample import config_from_args

    args = build_parser().parse_args(["sample", "pool", "--output", "r.json", "--rule", "matched-frequency", "--seed", "1",
                                      "--match-on", "posterior", "--selection-prior", "beta-binomial"])
    config = config_from_args(args)[0]
    assert (config.match_on, config.selection_prior) == ("posterior", "beta-binomial")
