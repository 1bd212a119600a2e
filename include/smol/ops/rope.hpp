#pragma once
// Rotary position embedding with interleaved pairs (llama.cpp's "NORM" mode): within each head,
// dimensions (2j, 2j+1) rotate by pos * theta^(-2j/head_dim). GGUF converters permute the Q and
// K rows so that this equals Hugging Face's rotate-half on the original weights.

#include <cmath>
#include <cstdint>
#include <vector>

namespace smol {

// cos/sin of every (token, pair) for a batch, computed once per forward pass and reused by
// every RoPE layer.
class RopeTable {
public:
    void compute(const std::int32_t* positions, std::int64_t n_tokens, int head_dim, float theta) {
        half_ = head_dim / 2;
        cos_.resize(std::size_t(n_tokens) * half_);
        sin_.resize(std::size_t(n_tokens) * half_);
        for (std::int64_t t = 0; t < n_tokens; ++t)
            for (int j = 0; j < half_; ++j) {
                const double angle = double(positions[t]) * std::pow(double(theta), -2.0 * j / head_dim);
                cos_[t * half_ + j] = float(std::cos(angle));
                sin_[t * half_ + j] = float(std::sin(angle));
            }
    }
    const float* cos(std::int64_t token) const { return cos_.data() + token * half_; }
    const float* sin(std::int64_t token) const { return sin_.data() + token * half_; }

private:
    int half_ = 0;
    std::vector<float> cos_;  // [n_tokens, head_dim / 2]
    std::vector<float> sin_;  // [n_tokens, head_dim / 2]
};

// x: [n_tokens, n_heads * head_dim], rotated in place.
inline void apply_rope(float* x, std::int64_t n_tokens, int n_heads, int head_dim, const RopeTable& table) {
#pragma omp parallel for schedule(static) if (n_tokens > 1)
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
