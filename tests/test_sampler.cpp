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

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_sampler {

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

// ---- the samplers past top-k/top-p/min-p, on hand-made logits ---------------------------------

namespace {

// Logits whose softmax is exactly `probabilities`.
std::vector<float> logits_of(std::initializer_list<double> probabilities) {
    std::vector<float> logits;
    for (const double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
    return logits;
}

// Only the listed stages, temperature 1, the usual filters off.
smol::SamplerParams chain(std::vector<smol::SamplerStage> order, std::uint64_t seed = 77) {
    smol::SamplerParams p = plain(1.0f, seed);
    p.samplers = std::move(order);
    return p;
}

using Stage = smol::SamplerStage;

// The logits after DRY on `history`: a greedy chain of DRY alone edits them in place.
std::vector<float> after_dry(smol::SamplerParams p, const std::vector<int>& history, int n_vocab,
                             smol::DryBreakers breakers = {}) {
    p.samplers = {Stage::dry, Stage::temperature};
    p.temperature = 0.0f;
    smol::Sampler sampler(p, n_vocab, std::move(breakers));
    for (const int token : history) sampler.accept(token);
    std::vector<float> logits(static_cast<std::size_t>(n_vocab), 0.0f);
    sampler.sample(logits);
    return logits;
}

// A vocabulary of one-character tokens: token i is text[i]; tokenizing is one token a character.
smol::DryBreakers breakers_for(const std::vector<std::string>& breakers, const std::string& text) {
    return smol::build_dry_breakers(
        breakers, static_cast<int>(text.size()),
        [&](std::int32_t id) { return std::string_view(text).substr(static_cast<std::size_t>(id), 1); },
        [&](std::string_view s) {
            std::vector<std::int32_t> ids;
            for (const char c : s) ids.push_back(static_cast<std::int32_t>(text.find(c)));
            return ids;
        });
}

}  // namespace

TEST_CASE("XTC removes every token at or above the threshold but the least likely of them") {
    const std::vector<float> logits = logits_of({0.4, 0.3, 0.2, 0.1});
    smol::SamplerParams p = chain({Stage::xtc, Stage::temperature});
    p.xtc_threshold = 0.15f;  // tokens 0, 1 and 2 are above it: 0 and 1 go, 2 stays
    p.xtc_probability = 1.0f;
    check_matches(draw_many(logits, p, 20000), {{2, 0.2 / 0.3}, {3, 0.1 / 0.3}});

    SUBCASE("with probability p, and otherwise the whole distribution") {
        p.xtc_probability = 0.5f;
        check_matches(draw_many(logits, p, 20000),
                      {{0, 0.5 * 0.4}, {1, 0.5 * 0.3}, {2, 0.5 * 0.2 + 0.5 * 0.2 / 0.3}, {3, 0.5 * 0.1 + 0.5 * 0.1 / 0.3}});
    }
    SUBCASE("one token above the threshold is left alone") {
        p.xtc_threshold = 0.35f;
        check_matches(draw_many(logits, p, 20000), {{0, 0.4}, {1, 0.3}, {2, 0.2}, {3, 0.1}});
    }
    SUBCASE("a threshold above 0.5 turns it off") {
        p.xtc_threshold = 0.6f;
        check_matches(draw_many(logits, p, 20000), {{0, 0.4}, {1, 0.3}, {2, 0.2}, {3, 0.1}});
    }
    SUBCASE("XTC can take the greedy pick away") {
        p.temperature = 0.0f;
        smol::Sampler sampler(p, 4);
        std::vector<float> scratch = logits;
        CHECK(sampler.sample(scratch) == 2);
    }
}

TEST_CASE("DRY penalises the token that would extend a repeat by multiplier * base^(length - allowed)") {
    smol::SamplerParams p;
    p.dry_multiplier = 0.8f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    // "1 2 3" ends the history and came before, followed by 4: a repeat of 3 that 4 would extend.
    const std::vector<float> out = after_dry(p, {1, 2, 3, 4, 5, 1, 2, 3}, 8);
    for (int token = 0; token < 8; ++token) {
        CAPTURE(token);
        CHECK(out[std::size_t(token)] == doctest::Approx(token == 4 ? -0.8 * std::pow(1.75, 3 - 2) : 0.0));
    }
    SUBCASE("a repeat exactly the allowed length costs the multiplier, a shorter one nothing") {
        const std::vector<float> two = after_dry(p, {2, 3, 6, 5, 2, 3}, 8);
        CHECK(two[6] == doctest::Approx(-0.8));
        p.dry_allowed_length = 3;
        const std::vector<float> none = after_dry(p, {2, 3, 6, 5, 2, 3}, 8);
        CHECK(std::all_of(none.begin(), none.end(), [](float v) { return v == 0.0f; }));
    }
    SUBCASE("the longest repeat counts when a token follows several") {
        // 7 follows "3" (length 1) and "1 2 3" (length 3).
        const std::vector<float> both = after_dry(p, {1, 2, 3, 7, 3, 7, 1, 2, 3}, 8);
        CHECK(both[7] == doctest::Approx(-0.8 * 1.75));
    }
    SUBCASE("only the last dry_penalty_last_n tokens are looked at") {
        p.dry_penalty_last_n = 4;
        const std::vector<float> out4 = after_dry(p, {1, 2, 3, 4, 5, 1, 2, 3}, 8);
        CHECK(out4[4] == 0.0f);
    }
    SUBCASE("a multiplier of 0 turns it off") {
        p.dry_multiplier = 0.0f;
        const std::vector<float> off = after_dry(p, {1, 2, 3, 4, 5, 1, 2, 3}, 8);
        CHECK(off[4] == 0.0f);
    }
}

TEST_CASE("DRY repeats never reach back across a sequence breaker") {
    smol::SamplerParams p;
    p.dry_multiplier = 0.8f;
    p.dry_allowed_length = 2;
    const std::string vocabulary = "\nabcdxyz";  // token 0 is a newline, 1 'a', ... 5 'x', 6 'y'
    // "\n b c" repeats with length 3, but the newline two tokens back limits it to 2.
    const std::vector<int> history = {0, 2, 3, 4, 0, 2, 3};
    CHECK(after_dry(p, history, 8)[4] == doctest::Approx(-0.8 * 1.75));
    CHECK(after_dry(p, history, 8, breakers_for({"\n"}, vocabulary))[4] == doctest::Approx(-0.8));

    // A breaker of two tokens ("xy") counts only as the whole sequence.
    const smol::DryBreakers xy = breakers_for({"xy"}, vocabulary);
    REQUIRE(xy.tails.size() == 1);
    CHECK(xy.tails[0].tokens == std::vector<std::int32_t>{6});
    CHECK(xy.tails[0].heads == std::vector<std::int32_t>{5});
    CHECK(after_dry(p, {5, 6, 3, 4, 5, 6, 3}, 8, xy)[4] == 0.0f);  // repeat limited to 1 < allowed
    CHECK(after_dry(p, {6, 6, 3, 4, 6, 6, 3}, 8, xy)[4] == doctest::Approx(-0.8 * 1.75));  // "y y" is no breaker
}

TEST_CASE("typical-p keeps the tokens whose surprise is nearest the entropy") {
    // Entropy 1.75 bits; surprises 1, 2, 3, 3 bits: token 1 is nearest, then token 0.
    const std::vector<float> logits = logits_of({0.5, 0.25, 0.125, 0.125});
    smol::SamplerParams p = chain({Stage::typical_p, Stage::temperature});
    p.typical_p = 0.5f;  // 0.25 is not past it, 0.25 + 0.5 is
    check_matches(draw_many(logits, p, 20000), {{0, 0.5 / 0.75}, {1, 0.25 / 0.75}});
    p.typical_p = 0.2f;  // token 1 alone: the most likely token is not typical
    check_matches(draw_many(logits, p, 2000), {{1, 1.0}});
    p.temperature = 0.0f;  // greedy after typical-p picks from what it kept
    smol::Sampler greedy(p, 4);
    std::vector<float> scratch = logits;
    CHECK(greedy.sample(scratch) == 1);
}

TEST_CASE("top-n-sigma keeps the logits within n standard deviations of the best") {
    const std::vector<float> logits = {10, 9, 0, 0, 0, 0, 0, 0};
    // mean 19/8, standard deviation sqrt(181/8 - (19/8)^2) = 4.12: 1 sigma keeps 10 and 9.
    smol::SamplerParams p = chain({Stage::top_n_sigma, Stage::temperature});
    p.top_n_sigma = 1.0f;
    const double e = std::exp(-1.0);
    check_matches(draw_many(logits, p, 20000), {{0, 1.0 / (1.0 + e)}, {1, e / (1.0 + e)}});
    p.top_n_sigma = 3.0f;  // 10 - 12.4 reaches below 0: everything stays
    const DrawStats all = draw_many(logits, p, 20000);
    CHECK(all.counts.size() > 2);
}

TEST_CASE("mirostat 2 keeps the tokens with surprise at most mu and learns mu from each draw") {
    const std::vector<float> logits = logits_of({0.5, 0.25, 0.125, 0.125});
    smol::SamplerParams p = chain({});
    p.mirostat = 2;
    p.mirostat_tau = 1.0f;  // mu starts at 2 bits: tokens 0 and 1
    p.mirostat_eta = 0.5f;
    std::map<int, int> counts;
    for (std::uint64_t seed = 1; seed <= 3000; ++seed) {
        p.seed = seed;
        smol::Sampler sampler(p, 4);
        std::vector<float> scratch = logits;
        const int token = sampler.sample(scratch);
        ++counts[token];
        // Renormalised over the two: surprise -log2(2/3) or -log2(1/3).
        const double surprise = token == 0 ? -std::log2(2.0 / 3.0) : -std::log2(1.0 / 3.0);
        CHECK(sampler.mirostat_mu() == doctest::Approx(2.0 - 0.5 * (surprise - 1.0)));
    }
    DrawStats stats;
    stats.counts = counts;
    stats.total = 3000;
    check_matches(stats, {{0, 2.0 / 3.0}, {1, 1.0 / 3.0}});
}

TEST_CASE("mirostat 1 and every stage together are deterministic under a seed") {
    const std::vector<float> logits = random_logits(500, 17, 2.0f);
    const auto run = [&](smol::SamplerParams p) {
        smol::Sampler sampler(p, 500);
        std::vector<int> tokens;
        for (int i = 0; i < 200; ++i) {
            std::vector<float> scratch = logits;
            tokens.push_back(sampler.sample(scratch));
            sampler.accept(tokens.back());
        }
        return tokens;
    };
    smol::SamplerParams everything;
    everything.seed = 5;
    everything.top_k = 100;
    everything.typical_p = 0.9f;
    everything.top_n_sigma = 2.0f;
    everything.xtc_probability = 0.5f;
    everything.dry_multiplier = 0.8f;
    everything.repeat_penalty = 1.1f;
    smol::SamplerParams mirostat1 = plain(1.0f, 5);
    mirostat1.mirostat = 1;
    for (const smol::SamplerParams& p : {everything, mirostat1}) {
        CAPTURE(p.mirostat);
        const std::vector<int> first = run(p);
        CHECK(first == run(p));
        smol::SamplerParams other = p;
        other.seed = 6;
        CHECK(first != run(other));
        CHECK(std::set<int>(first.begin(), first.end()).size() > 1);
    }
}

TEST_CASE("the samplers order changes the result") {
    const std::vector<float> logits = logits_of({0.4, 0.3, 0.2, 0.1});
    smol::SamplerParams p = chain({Stage::top_k, Stage::xtc, Stage::temperature});
    p.top_k = 1;
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.15f;
    check_matches(draw_many(logits, p, 1000), {{0, 1.0}});  // XTC sees one token and keeps it
    p.samplers = {Stage::xtc, Stage::top_k, Stage::temperature};
    check_matches(draw_many(logits, p, 1000), {{2, 1.0}});  // XTC leaves 2 and 3, top-k keeps 2

    // Without a temperature stage the temperature is not applied (llama.cpp's rule).
    smol::SamplerParams cold = chain({}, 3);
    cold.temperature = 0.0f;
    CHECK(draw_many(logits, cold, 2000).counts.size() == 4);
}

TEST_CASE("sampler names and letters are llama.cpp's") {
    for (const Stage stage : smol::kDefaultSamplerOrder)
        CHECK(smol::parse_sampler_stage(smol::sampler_stage_name(stage), false) == stage);
    CHECK(smol::parse_sampler_stage("typ_p", false) == Stage::typical_p);
    CHECK(smol::parse_sampler_stage("typical", false) == std::nullopt);
    CHECK(smol::parse_sampler_stage("typical", true) == Stage::typical_p);
    CHECK(smol::parse_sampler_stage("temp", true) == Stage::temperature);
    CHECK(smol::parse_sampler_stage("infill", true) == std::nullopt);
    CHECK(smol::parse_sampler_stage_letter('y') == Stage::typical_p);
    CHECK(smol::parse_sampler_stage_letter('x') == Stage::xtc);
    CHECK(smol::parse_sampler_stage_letter('q') == std::nullopt);
}

TEST_CASE("the new parameters are validated with clear errors") {
    const auto message = [](smol::SamplerParams p) {
        try {
            smol::Sampler sampler(p, 10);
        } catch (const smol::Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    smol::SamplerParams p;
    p.typical_p = 0.0f;
    CHECK(message(p).find("typical_p") != std::string::npos);
    p = {}; p.xtc_probability = 1.5f;
    CHECK(message(p).find("xtc_probability") != std::string::npos);
    p = {}; p.dry_base = 0.5f;
    CHECK(message(p).find("dry_base") != std::string::npos);
    p = {}; p.dry_penalty_last_n = -2;
    CHECK(message(p).find("dry_penalty_last_n") != std::string::npos);
    p = {}; p.dry_sequence_breakers = {std::string(41, 'a')};
    CHECK(message(p).find("dry_sequence_breakers") != std::string::npos);
    p = {}; p.dry_sequence_breakers.assign(17, "a");
    CHECK(message(p).find("dry_sequence_breakers") != std::string::npos);
    p = {}; p.mirostat = 3;
    CHECK(message(p).find("mirostat") != std::string::npos);
    p = {}; p.samplers.assign(17, Stage::top_k);
    CHECK(message(p).find("samplers") != std::string::npos);
    p = {}; p.top_n_sigma = std::nanf("");
    CHECK(message(p).find("top_n_sigma") != std::string::npos);
}

}  // namespace test_sampler
