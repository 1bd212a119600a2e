#pragma once
// Token sampling in llama.cpp's default chain order:
//   logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> seeded draw.
// Top-p and min-p therefore see the untempered distribution, as in llama.cpp, so the same
// flags keep the same meaning for users coming from there.
//
// Cost on a 128256-token vocabulary: one linear pass to copy logits into a scratch array,
// then nth_element for top-k (or a geometrically growing sorted prefix for top-p without
// top-k); the vocabulary is never fully sorted. Scratch buffers are sized once in the
// constructor, so sample() does not allocate.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

// Seed value meaning "draw a random seed from std::random_device", like llama.cpp's
// LLAMA_DEFAULT_SEED (what `-s -1` selects on its command line).
#define SMOL_DEFAULT_SEED 0xFFFFFFFFu

namespace smol {

struct SamplerParams {
    float temperature = 0.6f;        // <= 0: greedy (argmax, ties -> lowest id)
    int top_k = 40;                  // 0 = off
    float top_p = 0.95f;             // in (0, 1]; 1 = off
    float min_p = 0.05f;             // in [0, 1]; 0 = off
    float repeat_penalty = 1.0f;     // > 0; 1 = off
    float presence_penalty = 0.0f;   // 0 = off
    float frequency_penalty = 0.0f;  // 0 = off
    int penalty_last_n = 64;         // how many recently accepted tokens the penalties see; 0 = off
    std::uint64_t seed = SMOL_DEFAULT_SEED;
    // (token id, value added to its logit) before anything else, as OpenAI's logit_bias:
    // -100 all but bans a token, +100 all but forces it.
    std::vector<std::pair<std::int32_t, float>> logit_bias;
};

class Sampler {
public:
    Sampler(SamplerParams params, int n_vocab) : params_(params), n_vocab_(n_vocab) {
        validate();
        recent_.reserve(static_cast<std::size_t>(params_.penalty_last_n));
        window_scratch_.reserve(static_cast<std::size_t>(params_.penalty_last_n));
        candidates_.reserve(static_cast<std::size_t>(n_vocab_));
        reseed();
    }

    // Picks the next token from raw logits [n_vocab]. The logits are modified in place
    // (penalties applied); callers pass a buffer they will overwrite anyway.
    int sample(std::span<float> logits) {
        if (logits.size() != static_cast<std::size_t>(n_vocab_))
            fail("Sampler::sample: expected ", n_vocab_, " logits (the vocabulary size), got ",
                 logits.size());
        for (const auto& [token, bias] : params_.logit_bias) logits[static_cast<std::size_t>(token)] += bias;
        apply_penalties(logits);
        if (params_.temperature <= 0.0f) return argmax(logits);

        std::size_t sorted = 0;  // candidates_[0, sorted) is the best `sorted`, descending
        if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < logits.size()) {
            collect_top_k(logits, static_cast<std::size_t>(params_.top_k));
            sorted = candidates_.size();
        } else {
            // NaN logits become -inf so the orderings below stay strict weak orderings.
            candidates_.resize(logits.size());
            for (std::size_t i = 0; i < logits.size(); ++i) {
                const float logit = logits[i];
                candidates_[i] = {std::isnan(logit) ? -infinity : logit, static_cast<int>(i)};
            }
        }
        const auto first = candidates_.begin();
        std::size_t count = candidates_.size();  // live candidates are [first, first + count)
        const float max_logit =
            count == 0 ? -infinity
                       : (sorted > 0 ? first->logit
                                     : std::max_element(first, first + count, better_logit_only)->logit);
        if (max_logit == -infinity)
            fail("Sampler::sample: every candidate logit is -inf or NaN; nothing can be sampled");

        // Top-p's nucleus is measured against every candidate left by top-k, so the
        // normaliser is taken before min-p shrinks the set.
        double total_weight = 0.0;
        if (params_.top_p < 1.0f)
            for (std::size_t i = 0; i < count; ++i) total_weight += std::exp(first[i].logit - max_logit);

        // Top-p and min-p each keep a prefix of the sorted candidates, so applying min-p's
        // cheap threshold first and then walking top-p over the survivors keeps exactly the
        // shorter of the two prefixes: the same set as llama.cpp's top-p-then-min-p.
        if (params_.min_p > 0.0f) {
            const float threshold = max_logit + std::log(params_.min_p);
            const auto keep = [threshold](const Candidate& c) { return c.logit >= threshold; };
            if (sorted == count) {
                count = static_cast<std::size_t>(std::partition_point(first, first + count, keep) - first);
                sorted = count;
            } else {
                count = static_cast<std::size_t>(std::partition(first, first + count, keep) - first);
            }
        }

        if (params_.top_p < 1.0f) {
            const double target = static_cast<double>(params_.top_p) * total_weight;
            if (sorted < count) sorted = sort_nucleus_candidates(count, max_logit, target);
            double cumulative = 0.0;
            for (std::size_t i = 0; i < count; ++i) {
                if (i == sorted) sorted = extend_sorted_prefix(count, sorted);
                cumulative += std::exp(first[i].logit - max_logit);
                if (cumulative >= target) {
                    count = i + 1;
                    break;
                }
            }
        }

        return draw(count, max_logit);
    }

    // Records a token the caller committed to (sampled, or forced such as prompt tokens)
    // for the repeat/presence/frequency penalties.
    void accept(int token) {
        if (token < 0 || token >= n_vocab_)
            fail("Sampler::accept: token id ", token, " is outside the vocabulary [0, ", n_vocab_, ")");
        const auto window = static_cast<std::size_t>(params_.penalty_last_n);
        if (window == 0) return;
        if (recent_.size() < window) {
            recent_.push_back(token);
        } else {
            recent_[recent_oldest_] = token;
            recent_oldest_ = (recent_oldest_ + 1) % window;
        }
    }

    // Forgets the penalty history and reseeds: a fixed seed restarts the same sequence,
    // SMOL_DEFAULT_SEED draws a new random seed (llama.cpp's behaviour).
    void reset() {
        recent_.clear();
        recent_oldest_ = 0;
        reseed();
    }

    // Applies the repeat/presence/frequency penalties of the accepted history to logits
    // [n_vocab] in place; sample() calls this first.
    void apply_penalties(std::span<float> logits) {
        if (logits.size() != static_cast<std::size_t>(n_vocab_))
            fail("Sampler::apply_penalties: expected ", n_vocab_, " logits (the vocabulary size), got ",
                 logits.size());
        if (recent_.empty()) return;
        const float repeat = params_.repeat_penalty;
        const float presence = params_.presence_penalty;
        const float frequency = params_.frequency_penalty;
        if (repeat == 1.0f && presence == 0.0f && frequency == 0.0f) return;

        // Counting distinct tokens by sorting a copy of the (short) window avoids a
        // vocabulary-sized count table.
        window_scratch_.assign(recent_.begin(), recent_.end());
        std::sort(window_scratch_.begin(), window_scratch_.end());
        for (std::size_t i = 0; i < window_scratch_.size();) {
            const int token = window_scratch_[i];
            std::size_t j = i;
            while (j < window_scratch_.size() && window_scratch_[j] == token) ++j;
            const auto occurrences = static_cast<float>(j - i);
            float& logit = logits[static_cast<std::size_t>(token)];
            // Dividing a negative logit would make the token *more* likely, hence the split.
            logit = logit <= 0.0f ? logit * repeat : logit / repeat;
            logit -= occurrences * frequency + presence;
            i = j;
        }
    }

    std::uint64_t seed() const { return seed_in_use_; }  // the seed actually drawn with
    const SamplerParams& params() const { return params_; }
    int n_vocab() const { return n_vocab_; }

private:
    // Temperature, softmax and the draw over the live candidates [0, count). The weights
    // overwrite the logits in scratch.
    int draw(std::size_t count, float max_logit) {
        const auto first = candidates_.begin();
        const float inverse_temperature = 1.0f / params_.temperature;
        if (!std::isfinite(inverse_temperature))  // a denormal temperature: the limit is greedy
            return std::min_element(first, first + count, better)->id;
        double sum = 0.0;
        for (std::size_t i = 0; i < count; ++i) {
            const float weight = std::exp((first[i].logit - max_logit) * inverse_temperature);
            first[i].logit = weight;
            sum += weight;
        }
        const double target = uniform01() * sum;
        double cumulative = 0.0;
        for (std::size_t i = 0; i < count; ++i) {
            cumulative += first[i].logit;
            if (target < cumulative) return first[i].id;
        }
        return first[count - 1].id;  // rounding left target at the very top of the range
    }

    struct Candidate {
        float logit;
        int id;
    };
    static constexpr float infinity = std::numeric_limits<float>::infinity();

    // Descending logit, ties to the lower id, so results never depend on library internals.
    static bool better(const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
    static bool better_logit_only(const Candidate& a, const Candidate& b) { return a.logit < b.logit; }

    void validate() const {
        const SamplerParams& p = params_;
        if (n_vocab_ <= 0) fail("Sampler: expected a positive vocabulary size, got ", n_vocab_);
        if (std::isnan(p.temperature)) fail("Sampler: temperature is NaN (use <= 0 for greedy)");
        if (p.top_k < 0) fail("Sampler: top_k must be >= 0 (0 turns it off), got ", p.top_k);
        if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
            fail("Sampler: top_p must be in (0, 1] (1 turns it off), got ", p.top_p);
        if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
            fail("Sampler: min_p must be in [0, 1] (0 turns it off), got ", p.min_p);
        if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
            fail("Sampler: repeat_penalty must be a finite value > 0 (1 turns it off), got ", p.repeat_penalty);
        for (const auto& [token, bias] : p.logit_bias) {
            if (token < 0 || token >= n_vocab_)
                fail("Sampler: logit_bias names token id ", token, ", outside the vocabulary [0, ", n_vocab_, ")");
            if (!std::isfinite(bias)) fail("Sampler: logit_bias for token ", token, " must be finite, got ", bias);
        }
        if (!std::isfinite(p.presence_penalty))
            fail("Sampler: presence_penalty must be finite, got ", p.presence_penalty);
        if (!std::isfinite(p.frequency_penalty))
            fail("Sampler: frequency_penalty must be finite, got ", p.frequency_penalty);
        if (p.penalty_last_n < 0)
            fail("Sampler: penalty_last_n must be >= 0 (0 turns penalties off), got ", p.penalty_last_n);
    }

    void reseed() {
        seed_in_use_ = params_.seed;
        if (params_.seed == SMOL_DEFAULT_SEED) {
            std::random_device device;
            seed_in_use_ = (static_cast<std::uint64_t>(device()) << 32) | device();
        }
        rng_.seed(seed_in_use_);
    }

    // 53 random bits -> [0, 1): same numbers on every standard library, unlike
    // std::uniform_real_distribution whose algorithm is unspecified.
    double uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

    static int argmax(std::span<const float> logits) {
        int best = -1;
        float best_logit = -infinity;
        for (std::size_t i = 0; i < logits.size(); ++i)
            if (logits[i] > best_logit) {  // strict: ties keep the lowest id; NaN never wins
                best_logit = logits[i];
                best = static_cast<int>(i);
            }
        if (best < 0) fail("Sampler::sample: every logit is -inf or NaN; greedy has nothing to pick");
        return best;
    }

    // Leaves the k best tokens of logits [n_vocab] in candidates_, sorted. A running
    // threshold (the k-th best so far) rejects almost every token with one comparison, so
    // only a few thousand are ever written, instead of copying the whole vocabulary.
    void collect_top_k(std::span<const float> logits, std::size_t k) {
        candidates_.clear();  // capacity n_vocab: push_back below never reallocates
        const std::size_t compact_at = std::min(logits.size(), 2 * k + 4096);
        float threshold = -infinity;
        for (std::size_t i = 0; i < logits.size(); ++i) {
            // Strict: a later token equal to the k-th best has a higher id and ranks below
            // it. NaN fails the comparison and so is never a candidate.
            if (!(logits[i] > threshold)) continue;
            candidates_.push_back({logits[i], static_cast<int>(i)});
            if (candidates_.size() == compact_at) {
                std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(), better);
                candidates_.resize(k);
                threshold = candidates_[k - 1].logit;
            }
        }
        if (candidates_.size() > k) {
            std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(), better);
            candidates_.resize(k);
        }
        std::sort(candidates_.begin(), candidates_.end(), better);
    }

    // Without top-k the nucleus has to be found among the whole vocabulary. A histogram of
    // the softmax weight over logit buckets below the maximum shows which buckets the
    // nucleus reaches into; only their tokens are moved to the front and sorted, an O(n)
    // pass plus a sort of about the nucleus (llama.cpp's bucket approach). Returns the
    // sorted length.
    std::size_t sort_nucleus_candidates(std::size_t count, float max_logit, double target) {
        const auto first = candidates_.begin();
        constexpr int n_buckets = static_cast<int>(nucleus_buckets);
        // Weights below e^-40 of the top cannot change a nucleus at float precision.
        constexpr float covered_range = 40.0f;
        constexpr float buckets_per_unit = static_cast<float>(n_buckets) / covered_range;
        const auto bucket_of = [max_logit](float logit) {
            const float position = (max_logit - logit) * buckets_per_unit;  // +inf for -inf logits
            return position < static_cast<float>(n_buckets - 1) ? static_cast<int>(position) : n_buckets - 1;
        };
        bucket_weight_.fill(0.0);
        for (std::size_t i = 0; i < count; ++i)
            bucket_weight_[static_cast<std::size_t>(bucket_of(first[i].logit))] +=
                std::exp(first[i].logit - max_logit);
        int last_bucket = n_buckets - 1;
        double cumulative = 0.0;
        for (int b = 0; b < n_buckets; ++b) {
            cumulative += bucket_weight_[static_cast<std::size_t>(b)];
            if (cumulative >= target) {
                last_bucket = b;
                break;
            }
        }
        const auto nucleus_end = std::partition(first, first + count, [&](const Candidate& c) {
            return bucket_of(c.logit) <= last_bucket;
        });
        std::sort(first, nucleus_end, better);
        return static_cast<std::size_t>(nucleus_end - first);
    }

    // Fallback when rounding left the bucketed prefix just short of the target: grows the
    // sorted prefix of [0, count) geometrically. Returns the new sorted length.
    std::size_t extend_sorted_prefix(std::size_t count, std::size_t sorted) {
        const auto first = candidates_.begin();
        const std::size_t goal = std::min(count, std::max<std::size_t>(64, sorted * 4));
        if (goal < count) std::nth_element(first + sorted, first + goal, first + count, better);
        std::sort(first + sorted, first + goal, better);
        return goal;
    }

    SamplerParams params_;
    int n_vocab_;
    std::uint64_t seed_in_use_ = 0;
    std::mt19937_64 rng_;
    std::vector<int> recent_;          // [<= penalty_last_n] ring buffer of accepted tokens
    std::size_t recent_oldest_ = 0;    // slot overwritten next once the ring is full
    std::vector<int> window_scratch_;  // [<= penalty_last_n] sorted copy of recent_
    std::vector<Candidate> candidates_;  // [n_vocab] scratch
    static constexpr std::size_t nucleus_buckets = 1024;
    std::array<double, nucleus_buckets> bucket_weight_{};  // softmax weight per logit bucket
};

}  // namespace smol
