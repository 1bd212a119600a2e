#pragma once
// Log-probabilities of sampled tokens, as the OpenAI API reports them: the model's own
// distribution (a softmax of the raw logits, before penalties, temperature or truncation), the
// chosen token's log-probability and the most likely alternatives.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "smol/core/error.hpp"

namespace smol {

inline constexpr int kMaxTopLogprobs = 20;  // as OpenAI allows

struct TokenAlternative {
    std::int32_t token = 0;
    float logprob = 0.0f;
};

struct TokenLogprob {
    std::int32_t token = 0;  // the sampled token
    float logprob = 0.0f;
    std::vector<TokenAlternative> top;  // the most likely tokens, most likely first (ties: lower id first)
};

// log softmax(logits)[token] and the top_n most likely tokens. NaN logits count as impossible.
// logits: [n_vocab], raw.
inline TokenLogprob token_logprob(std::span<const float> logits, std::int32_t token, int top_n) {
    if (token < 0 || std::size_t(token) >= logits.size())
        fail("token_logprob: token ", token, " is outside the ", logits.size(), " logits");
    if (top_n < 0 || top_n > kMaxTopLogprobs)
        fail("token_logprob: top_n must be in [0, ", kMaxTopLogprobs, "], got ", top_n);
    const auto clean = [](float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; };
    float max = -std::numeric_limits<float>::infinity();
    for (const float x : logits) max = std::max(max, clean(x));
    if (max == -std::numeric_limits<float>::infinity()) fail("token_logprob: every logit is -inf or NaN");
    double sum = 0.0;
    for (const float x : logits) sum += std::exp(double(clean(x)) - max);
    const double log_norm = double(max) + std::log(sum);
    const auto logprob = [&](std::int32_t id) { return float(double(clean(logits[std::size_t(id)])) - log_norm); };

    TokenLogprob out{token, logprob(token), {}};
    // A running top list: top_n is at most 20, so insertion beats sorting the vocabulary.
    std::vector<std::int32_t> best;
    best.reserve(std::size_t(top_n) + 1);
    const auto better = [&](std::int32_t a, std::int32_t b) {
        const float la = clean(logits[std::size_t(a)]), lb = clean(logits[std::size_t(b)]);
        return la != lb ? la > lb : a < b;
    };
    for (std::int32_t id = 0; top_n > 0 && std::size_t(id) < logits.size(); ++id) {
        if (best.size() == std::size_t(top_n) && !better(id, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
        if (best.size() > std::size_t(top_n)) best.pop_back();
    }
    for (const std::int32_t id : best) out.top.push_back({id, logprob(id)});
    return out;
}

}  // namespace smol
