#pragma once
// Rotary position embedding with interleaved pairs (llama.cpp's "NORM" mode): within each head,
// dimensions (2j, 2j+1) rotate by pos * theta^(-2j/head_dim). GGUF converters permute the Q and
// K rows so that this equals Hugging Face's rotate-half on the original weights.
//
// YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension") stretches a model past
// the context N it was trained at by a factor F: pairs that turn many times within N keep
// their frequency (extrapolation), pairs that turn less than once are slowed by 1/F
// (interpolation), with a linear ramp between the pair indices where a pair makes beta_fast
// and beta_slow turns over N; both rotations are scaled by 1 + 0.1 ln F, which sharpens the
// attention logits by its square. Semantics and defaults are llama.cpp's (--rope-scaling yarn).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "smol/core/threads.hpp"

namespace smol {

struct RopeScaling {
    enum class Type { none, yarn };
    Type type = Type::none;
    double factor = 1.0;             // F: the context is stretched F times; frequencies scale by 1/F
    int original_context = 0;        // N: the context the model was trained at
    double beta_fast = 32.0;         // pairs making more turns than this over N extrapolate
    double beta_slow = 1.0;          // pairs making fewer turns than this over N interpolate
    double extrapolation_mix = 1.0;  // how much of the ramp applies (llama.cpp's --yarn-ext-factor)

    bool yarn() const { return type == Type::yarn; }
    // The magnitude both rotations are scaled by (llama.cpp applies it to cos and sin).
    double attention_factor() const { return yarn() ? 1.0 + 0.1 * std::log(factor) : 1.0; }
};

// The fractional pair index where a pair makes `turns` rotations over `context` positions.
inline double yarn_pair_for_turns(int head_dim, int context, double turns, double theta) {
    return head_dim * std::log(context / (turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
}

// cos/sin of every (token, pair) for a batch, computed once per forward pass and reused by
// every RoPE layer.
class RopeTable {
public:
    void compute(const std::int32_t* positions, std::int64_t n_tokens, int head_dim, float theta,
                 const RopeScaling& scaling = {}) {
        half_ = head_dim / 2;
        cos_.resize(std::size_t(n_tokens) * half_);
        sin_.resize(std::size_t(n_tokens) * half_);
        // YaRN's ramp runs from pair `low` (full extrapolation) to `high` (full interpolation).
        double low = 0.0, high = 0.0;
        if (scaling.yarn()) {
            low = std::max(0.0, std::floor(yarn_pair_for_turns(head_dim, scaling.original_context, scaling.beta_fast, theta)));
            high = std::min(double(head_dim - 1),
                            std::ceil(yarn_pair_for_turns(head_dim, scaling.original_context, scaling.beta_slow, theta)));
        }
        const double magnitude = scaling.attention_factor();
        for (std::int64_t t = 0; t < n_tokens; ++t)
            for (int j = 0; j < half_; ++j) {
                const double extrapolated = double(positions[t]) * std::pow(double(theta), -2.0 * j / head_dim);
                double angle = extrapolated;
                if (scaling.yarn()) {
                    const double interpolated = extrapolated / scaling.factor;
                    const double ramp = 1.0 - std::clamp((j - low) / std::max(0.001, high - low), 0.0, 1.0);
                    const double mix = ramp * scaling.extrapolation_mix;
                    angle = interpolated * (1.0 - mix) + extrapolated * mix;
                }
                cos_[t * half_ + j] = float(std::cos(angle) * magnitude);
                sin_[t * half_ + j] = float(std::sin(angle) * magnitude);
            }
    }
    const float* cos(std::int64_t token) const { return cos_.data() + token * half_; }
    const float* sin(std::int64_t token) const { return sin_.data() + token * half_; }

private:
    int half_ = 0;
    std::vector<float> cos_;  // [n_tokens, head_dim / 2]
    std::vector<float> sin_;  // [n_tokens, head_dim / 2]
};

// x: [n_tokens, n_heads * head_dim], rotated in place. `threads`: the work's thread count (thread_team).
inline void apply_rope(float* x, std::int64_t n_tokens, int n_heads, int head_dim, const RopeTable& table,
                       int threads = 0) {
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (n_tokens > 1)
    for (std::int64_t t = 0; t < n_tokens; ++t) {
        const float* c = table.cos(t);
        const float* s = table.sin(t);
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int j = 0; j < head_dim / 2; ++j) {
                const float a = v[2 * j], b = v[2 * j + 1];
                v[2 * j] = a * c[j] - b * s[j];
                v[2 * j + 1] = a * s[j] + b * c[j];
            }
        }
    }
}

}  // namespace smol
