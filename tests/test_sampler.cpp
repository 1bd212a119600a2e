// Sampler tests: every filter is checked statistically on fixed logits against a naive
// reference written straight from the definitions (full sort, llama.cpp's chain order),
// plus hand-computed penalty values and greedy tie-breaks.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "smol/generate/sampler.hpp"

namespace {

std::vector<float> random_logits(int n, std::uint64_t seed, float spread = 3.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> logits(static_cast<std::size_t>(n));
    for (float& logit : logits) logit = normal(rng);
    return logits;
}

// Reference distribution: full sort, then top-k, top-p (on the untempered softmax of the
// top-k survivors), min-p (relative to the max), temperature, softmax. Returns id -> prob.
std::map<int, double> reference_distribution(const std::vector<float>& logits, const smol::SamplerParams& p) {
    std::vector<int> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    if (p.top_k > 0 && static_cast<std::size_t>(p.top_k) < order.size()) order.resize(p.top_k);

    const double max_logit = logits[order[0]];
    if (p.top_p < 1.0f) {
        double total = 0.0;
        for (int id : order) total += std::exp(logits[id] - max_logit);
        double cumulative = 0.0;
        std::size_t keep = order.size();
        for (std::size_t i = 0; i < order.size(); ++i) {
            cumulative += std::exp(logits[order[i]] - max_logit) / total;
            if (cumulative >= p.top_p) {
                keep = i + 1;
                break;
            }
        }
        order.resize(keep);
    }
    if (p.min_p > 0.0f) {
        std::vector<int> kept;
        for (int id : order)
            if (std::exp(logits[id] - max_logit) >= p.min_p) kept.push_back(id);
        order = kept;
    }
    std::map<int, double> probs;
    double sum = 0.0;
    for (int id : order) sum += probs[id] = std::exp((logits[id] - max_logit) / p.temperature);
    for (auto& [id, prob] : probs) prob /= sum;
    return probs;
}

struct DrawStats {
    std::map<int, int> counts;
    int total = 0;
};

DrawStats draw_many(const std::vector<float>& logits, const smol::SamplerParams& p, int draws) {
    smol::Sampler sampler(p, static_cast<int>(logits.size()));
    std::vector<float> scratch;
    DrawStats stats;
    for (int i = 0; i < draws; ++i) {
        scratch = logits;
        ++stats.counts[sampler.sample(scratch)];
        ++stats.total;
    }
    return stats;
}

// Pearson chi-square of observed counts against expected probabilities, bins with an
// expected count below 5 pooled. Fails if any draw lands outside the support.
void check_matches(const DrawStats& stats, const std::map<int, double>& expected) {
    for (const auto& [id, count] : stats.counts) {
        INFO("token ", id, " drawn ", count, " times but is outside the reference support");
        CHECK(expected.count(id) == 1);
    }
    double chi2 = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
    int bins = 0;
    for (const auto& [id, prob] : expected) {
        const double e = prob * stats.total;
        const auto it = stats.counts.find(id);
        const double o = it == stats.counts.end() ? 0.0 : it->second;
        if (e < 5.0) {
            pooled_expected += e;
            pooled_observed += o;
            continue;
        }
        chi2 += (o - e) * (o - e) / e;
        ++bins;
    }
    if (pooled_expected >= 5.0) {
        chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
        ++bins;
    }
    const double dof = std::max(1, bins - 1);
    // About 5 standard deviations above the mean of chi-square(dof): a wrong filter or a
    // skewed draw lands far beyond this, a correct one essentially never does.
    const double limit = dof + 5.0 * std::sqrt(2.0 * dof) + 10.0;
    INFO("chi-square ", chi2, " over ", dof, " degrees of freedom, limit ", limit);
    CHECK(chi2 < limit);
}

double empirical_entropy(const DrawStats& stats) {
    double h = 0.0;
    for (const auto& [id, count] : stats.counts) {
        const double p = static_cast<double>(count) / stats.total;
        h -= p * std::log(p);
    }
    return h;
}

smol::SamplerParams plain(float temperature, std::uint64_t seed = 1234) {
    smol::SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

}  // namespace

TEST_CASE("greedy picks the argmax and breaks ties toward the lowest id") {
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    for (float temperature : {0.0f, -1.0f}) {
        smol::Sampler sampler(plain(temperature), 5);
        for (int i = 0; i < 10; ++i) {
            std::vector<float> copy = logits;
            CHECK(sampler.sample(copy) == 1);
        }
    }
    // A temperature so small that 1/T overflows behaves as its limit, greedy.
    smol::Sampler tiny(plain(1e-45f), 5);
    std::vector<float> copy = logits;
    CHECK(tiny.sample(copy) == 1);

    std::vector<float> all_equal(7, 3.0f);
    smol::Sampler sampler(plain(0.0f), 7);
    CHECK(sampler.sample(all_equal) == 0);
}

TEST_CASE("greedy applies penalties before the argmax") {
    smol::SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    smol::Sampler sampler(p, 3);
    sampler.accept(0);
    std::vector<float> logits = {3.0f, 2.0f, 1.0f};  // token 0 becomes 1.5 < 2.0
    CHECK(sampler.sample(logits) == 1);
}

TEST_CASE("logit bias is added before penalties and the argmax") {
    smol::SamplerParams p = plain(0.0f);
    p.logit_bias = {{0, -100.0f}, {2, 1.5f}};
    smol::Sampler sampler(p, 3);
    std::vector<float> logits = {3.0f, 2.0f, 1.0f};  // biased: -97, 2, 2.5
    CHECK(sampler.sample(logits) == 2);
    CHECK(logits[0] == -97.0f);
    // With penalties on, the penalty sees the biased logit (llama.cpp's chain order).
    p.logit_bias = {{1, 2.0f}};
    p.repeat_penalty = 2.0f;
    smol::Sampler penalised(p, 3);
    penalised.accept(1);
    logits = {3.0f, 2.0f, 1.0f};  // token 1: (2 + 2) / 2 = 2 < 3
    CHECK(penalised.sample(logits) == 0);
    CHECK(logits[1] == 2.0f);
    // A banned token never comes out of the sampled chain either.
    smol::SamplerParams sampled;
    sampled.top_k = 0;
    sampled.top_p = 1.0f;
    sampled.min_p = 0.0f;
    sampled.temperature = 1.0f;
    sampled.seed = 7;
    sampled.logit_bias = {{3, -100.0f}};
    smol::Sampler draw(sampled, 4);
    for (int i = 0; i < 500; ++i) {
        std::vector<float> flat = {0.0f, 0.0f, 0.0f, 5.0f};
        CHECK(draw.sample(flat) != 3);
    }
}

TEST_CASE("parameters are validated with clear errors") {
    const auto throws = [](smol::SamplerParams p, int n_vocab = 10) {
        CHECK_THROWS_AS(smol::Sampler(p, n_vocab), smol::Error);
    };
    smol::SamplerParams p;
    throws(p, 0);
    p = {}; p.top_k = -1; throws(p);
    p = {}; p.top_p = 0.0f; throws(p);
    p = {}; p.top_p = 1.5f; throws(p);
    p = {}; p.top_p = std::nanf(""); throws(p);
    p = {}; p.min_p = -0.1f; throws(p);
    p = {}; p.min_p = 1.1f; throws(p);
    p = {}; p.repeat_penalty = 0.0f; throws(p);
    p = {}; p.penalty_last_n = -1; throws(p);
    p = {}; p.temperature = std::nanf(""); throws(p);
    p = {}; p.presence_penalty = INFINITY; throws(p);
    p = {}; p.logit_bias = {{10, 1.0f}}; throws(p);
    p = {}; p.logit_bias = {{-1, 1.0f}}; throws(p);
    p = {}; p.logit_bias = {{3, NAN}}; throws(p);

    try {
        p = {};
        p.top_k = -3;
        smol::Sampler sampler(p, 10);
        FAIL("expected an error");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()).find("top_k must be >= 0") != std::string::npos);
        CHECK(std::string(e.what()).find("-3") != std::string::npos);
    }

    smol::Sampler sampler(smol::SamplerParams{}, 10);
    std::vector<float> wrong_size(9, 0.0f);
    CHECK_THROWS_AS(sampler.sample(wrong_size), smol::Error);
    CHECK_THROWS_AS(sampler.accept(10), smol::Error);
    CHECK_THROWS_AS(sampler.accept(-1), smol::Error);
    std::vector<float> all_masked(10, -INFINITY);
    CHECK_THROWS_AS(sampler.sample(all_masked), smol::Error);
}

TEST_CASE("plain softmax sampling matches the probabilities (chi-square)") {
    const std::vector<float> logits = {1.0f, 0.0f, -0.5f, 2.0f, 0.3f, -2.0f, 1.5f, 0.9f};
    for (float temperature : {0.7f, 1.0f, 1.8f}) {
        INFO("temperature ", temperature);
        const smol::SamplerParams p = plain(temperature, 42);
        check_matches(draw_many(logits, p, 40000), reference_distribution(logits, p));
    }

    // Hand check of the reference itself on two tokens: p0 = 1 / (1 + e^-1) at T = 1.
    const auto two = reference_distribution({1.0f, 0.0f}, plain(1.0f));
    CHECK(two.at(0) == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))));
}

TEST_CASE("top-k never leaves the k best tokens") {
    const std::vector<float> logits = random_logits(1000, 7);
    smol::SamplerParams p = plain(2.0f, 99);
    p.top_k = 10;
    std::vector<int> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 10, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    const std::set<int> best(order.begin(), order.begin() + 10);

    const DrawStats stats = draw_many(logits, p, 20000);
    for (const auto& [id, count] : stats.counts) CHECK(best.count(id) == 1);
    CHECK(stats.counts.size() >= 5);  // temperature 2 spreads draws over the k tokens
    check_matches(stats, reference_distribution(logits, p));
}

TEST_CASE("top-p stays inside the nucleus") {
    // Probabilities 1/2, 1/4, 1/8, 1/16, 1/16: a nucleus of 0.8 is the first three tokens.
    const std::vector<float> logits = {std::log(0.0625f), std::log(0.25f), std::log(0.5f),
                                       std::log(0.0625f), std::log(0.125f)};
    smol::SamplerParams p = plain(1.0f, 5);
    p.top_p = 0.8f;
    const DrawStats stats = draw_many(logits, p, 30000);
    CHECK(stats.counts.count(0) == 0);
    CHECK(stats.counts.count(3) == 0);
    CHECK(stats.counts.size() == 3);
    // Renormalised nucleus: 4/7, 2/7, 1/7.
    const std::map<int, double> nucleus = {{2, 4.0 / 7.0}, {1, 2.0 / 7.0}, {4, 1.0 / 7.0}};
    check_matches(stats, nucleus);
}

TEST_CASE("top-p without top-k on a full-size vocabulary") {
    // 128256 tokens exercise the growing sorted prefix: the nucleus here holds thousands.
    const std::vector<float> logits = random_logits(128256, 11, 2.0f);
    smol::SamplerParams p = plain(1.0f, 77);
    p.top_p = 0.5f;
    const auto expected = reference_distribution(logits, p);
    MESSAGE("nucleus size: ", expected.size());
    CHECK(expected.size() > 1000);
    const DrawStats stats = draw_many(logits, p, 300);
    for (const auto& [id, count] : stats.counts) CHECK(expected.count(id) == 1);
    CHECK(stats.counts.size() > 100);  // the draws really spread over a wide nucleus

    // A peaked distribution: the nucleus is a handful of tokens, frequencies must match.
    std::vector<float> peaked = random_logits(128256, 12, 1.0f);
    for (int i = 0; i < 6; ++i) peaked[static_cast<std::size_t>(i * 20011)] = 14.0f - static_cast<float>(i);
    p.top_p = 0.9f;
    const auto peaked_expected = reference_distribution(peaked, p);
    CHECK(peaked_expected.size() < 20);
    check_matches(draw_many(peaked, p, 1000), peaked_expected);
}

TEST_CASE("min-p keeps exactly the tokens at or above min_p times the top probability") {
    // Relative probabilities e^0, e^-1, e^-2, ...; min_p = 0.2 keeps e^0 and e^-1 only
    // (e^-2 = 0.135 < 0.2 <= e^-1 = 0.368).
    const std::vector<float> logits = {-3.0f, 0.0f, -1.0f, -2.0f, -4.0f};
    smol::SamplerParams p = plain(1.0f, 3);
    p.min_p = 0.2f;
    const DrawStats stats = draw_many(logits, p, 30000);
    CHECK(stats.counts.size() == 2);
    const double e = std::exp(1.0);
    check_matches(stats, {{1, e / (1.0 + e)}, {2, 1.0 / (1.0 + e)}});

    // On a larger vocabulary, no draw falls under the threshold.
    const std::vector<float> many = random_logits(5000, 21);
    p.min_p = 0.05f;
    const float max_logit = *std::max_element(many.begin(), many.end());
    const DrawStats wide = draw_many(many, p, 5000);
    for (const auto& [id, count] : wide.counts) CHECK(std::exp(many[id] - max_logit) >= 0.05f);
}

TEST_CASE("the full default chain matches the reference") {
    const std::vector<float> logits = random_logits(8000, 31, 2.5f);
    for (auto [k, top_p, min_p, temperature] :
         {std::tuple{40, 0.95f, 0.05f, 0.6f}, std::tuple{40, 0.7f, 0.0f, 1.0f},
          std::tuple{0, 0.9f, 0.02f, 1.3f}, std::tuple{100, 1.0f, 0.1f, 0.9f}}) {
        smol::SamplerParams p;
        p.top_k = k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.temperature = temperature;
        p.seed = 2024;
        INFO("top_k ", k, " top_p ", top_p, " min_p ", min_p, " temperature ", temperature);
        check_matches(draw_many(logits, p, 10000), reference_distribution(logits, p));
    }
}

TEST_CASE("higher temperature gives higher entropy") {
    const std::vector<float> logits = random_logits(50, 3, 1.5f);
    double previous = -1.0;
    for (float temperature : {0.3f, 0.7f, 1.0f, 2.0f}) {
        const double h = empirical_entropy(draw_many(logits, plain(temperature, 8), 20000));
        INFO("temperature ", temperature, " entropy ", h);
        CHECK(h > previous + 0.05);
        previous = h;
    }
}

TEST_CASE("same seed gives the same sequence, another seed a different one") {
    const std::vector<float> logits = random_logits(1000, 5, 1.0f);
    const auto run = [&](std::uint64_t seed) {
        smol::SamplerParams p;
        p.seed = seed;
        p.temperature = 1.0f;
        smol::Sampler sampler(p, 1000);
        std::vector<int> tokens;
        for (int i = 0; i < 200; ++i) {
            std::vector<float> copy = logits;
            tokens.push_back(sampler.sample(copy));
        }
        return tokens;
    };
    CHECK(run(17) == run(17));
    CHECK(run(17) != run(18));

    // reset() restarts a fixed seed's sequence.
    smol::SamplerParams p;
    p.seed = 17;
    p.temperature = 1.0f;
    smol::Sampler sampler(p, 1000);
    std::vector<int> first, second;
    for (int i = 0; i < 200; ++i) {
        std::vector<float> copy = logits;
        first.push_back(sampler.sample(copy));
    }
    sampler.reset();
    for (int i = 0; i < 200; ++i) {
        std::vector<float> copy = logits;
        second.push_back(sampler.sample(copy));
    }
    CHECK(first == second);
    CHECK(sampler.seed() == 17);

    // SMOL_DEFAULT_SEED draws a random seed; two samplers agreeing would be a 2^-64 event.
    smol::SamplerParams random_params;
    CHECK(random_params.seed == SMOL_DEFAULT_SEED);
    smol::Sampler a(random_params, 10), b(random_params, 10);
    CHECK(a.seed() != b.seed());
}

TEST_CASE("penalties change the right logits by the right amounts") {
    const std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f, -1.0f};
    smol::SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;

    SUBCASE("all three, whole history in the window") {
        smol::Sampler sampler(p, 6);
        for (int token : {0, 2, 0, 1}) sampler.accept(token);
        std::vector<float> out = logits;
        sampler.apply_penalties(out);
        // token 0 (2x): 2/2 - 2*0.25 - 0.5 = 0; token 1 (1x): -2*2 - 0.25 - 0.5 = -4.75;
        // token 2 (1x): 1/2 - 0.75 = -0.25; the others untouched.
        CHECK(out[0] == doctest::Approx(0.0f));
        CHECK(out[1] == doctest::Approx(-4.75f));
        CHECK(out[2] == doctest::Approx(-0.25f));
        CHECK(out[3] == 0.5f);
        CHECK(out[4] == 3.0f);
        CHECK(out[5] == -1.0f);
    }
    SUBCASE("only the last penalty_last_n tokens count") {
        p.penalty_last_n = 2;
        smol::Sampler sampler(p, 6);
        for (int token : {0, 0, 0, 4, 2, 1}) sampler.accept(token);  // window: 2, 1
        std::vector<float> out = logits;
        sampler.apply_penalties(out);
        CHECK(out[0] == 2.0f);
        CHECK(out[4] == 3.0f);
        CHECK(out[1] == doctest::Approx(-4.75f));
        CHECK(out[2] == doctest::Approx(-0.25f));
    }
    SUBCASE("window of zero and reset() turn them off") {
        p.penalty_last_n = 0;
        smol::Sampler off(p, 6);
        off.accept(0);
        std::vector<float> out = logits;
        off.apply_penalties(out);
        CHECK(out == logits);

        p.penalty_last_n = 64;
        smol::Sampler sampler(p, 6);
        sampler.accept(0);
        sampler.reset();
        out = logits;
        sampler.apply_penalties(out);
        CHECK(out == logits);
    }
    SUBCASE("sample() applies them: a penalised favourite loses") {
        smol::SamplerParams q = plain(0.0f);
        q.presence_penalty = 1.5f;
        smol::Sampler sampler(q, 6);
        std::vector<float> out = logits;
        CHECK(sampler.sample(out) == 4);
        sampler.accept(4);
        out = logits;
        CHECK(sampler.sample(out) == 0);  // 3 - 1.5 = 1.5 < 2
    }
}

TEST_CASE("the default chain on a full 128256-token vocabulary stays inside the top-k") {
    // Speed belongs to bench/, not to a test: this checks only what the sampler returns.
    const std::vector<float> logits = random_logits(128256, 13);
    smol::SamplerParams p;  // defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.6
    p.seed = 1;
    smol::Sampler sampler(p, 128256);
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<>());
    const float kth_best = sorted[39];
    std::vector<float> scratch = logits;
    for (int i = 0; i < 200; ++i) {
        std::copy(logits.begin(), logits.end(), scratch.begin());
        const int token = sampler.sample(scratch);
        REQUIRE(token >= 0);
        REQUIRE(token < 128256);
        CHECK(logits[static_cast<std::size_t>(token)] >= kth_best);
    }
}
