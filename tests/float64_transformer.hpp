#pragma once
// A float64 SmolLM3 forward pass written with Eigen, straight from docs/smollm3.md, for the
// tests to check smol's forward pass against without new fixtures (test_float64_reference).
//
// Independent of smol's kernels: none of smol's matmul, attention, RoPE, RMSNorm or SwiGLU is
// called. What it shares with smol is the file reading (gguf/reader.hpp) and the scalar block
// dequantizers and quantizers (quant/reference.hpp), which test_quant checks block by block;
// the dense math is all here. Hyperparameters come from the file's `smollm3.*` metadata and
// tensor shapes, never from smol's compiled configs, and the NoPE layers from the architecture's
// rule ((il + 1) % 4 == 0), which the file does not carry.
//
// Every sequence starts at position 0 and is processed in one pass: logits(tokens) gives the
// rows after each token, [n_tokens, n_vocab]. Options add what an engine run may differ by:
// YaRN (llama.cpp's rope_yarn, which the yarn/ fixtures were made with) and the rounding a
// quantized KV cache applies to keys, values and (for Q4_0 keys) queries, so a quantized
// cache can be compared against the same rounding instead of against a loose bound.

// One thread: Eigen's OpenMP GEMM waits for its threads by spinning, which on a busy 2-core
// machine ran these products 5-8x slower than one thread does (2.4 against 15.8 GFLOP/s).
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/type_table.hpp"  // the reference dequantizers and quantizers, by type

namespace smol_test {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Float64Options {
    // YaRN as llama.cpp's --rope-scaling yarn --rope-scale F --yarn-orig-ctx N (F = 1: off):
    // frequencies scaled by 1/F outside the extrapolation ramp, beta_fast 32, beta_slow 1,
    // extrapolation mix 1, cos and sin scaled by 1 + 0.1 ln F.
    double yarn_factor = 1.0;
    int yarn_original_context = 0;
    // A quantized KV cache's rounding: keys and values stored as these types, and queries as
    // Q8_0 against Q4_0 keys (llama.cpp's vec_dot_type for Q4_0). Off: keys and values exact.
    bool round_cache = false;
    smol::KvCacheTypes cache_types;
};

class Float64Transformer {
public:
    explicit Float64Transformer(const smol::gguf::File& file) {
        const std::string arch(file.get_string("general.architecture"));
        if (arch != "smollm3") smol::fail(file.name(), ": expected general.architecture smollm3, found ", arch);
        const auto key = [&](const char* name) { return file.get_int(std::string("smollm3.") + name); };
        n_layers_ = bounded(file, "block_count", key("block_count"), 1, 256);
        d_model_ = bounded(file, "embedding_length", key("embedding_length"), 1, 1 << 16);
        d_ffn_ = bounded(file, "feed_forward_length", key("feed_forward_length"), 1, 1 << 18);
        n_heads_ = bounded(file, "attention.head_count", key("attention.head_count"), 1, 1024);
        n_kv_heads_ = bounded(file, "attention.head_count_kv", key("attention.head_count_kv"), 1, n_heads_);
        if (n_heads_ % n_kv_heads_ != 0 || d_model_ % n_heads_ != 0)
            smol::fail(file.name(), ": expected head counts dividing each other and the embedding (", d_model_, ", ",
                       n_heads_, ", ", n_kv_heads_, ")");
        head_dim_ = d_model_ / n_heads_;
        n_rot_ = bounded(file, "rope.dimension_count", key("rope.dimension_count"), 2, head_dim_);
        if (n_rot_ % 2 != 0) smol::fail(file.name(), ": expected an even rope.dimension_count, found ", n_rot_);
        rope_theta_ = file.get_float("smollm3.rope.freq_base");
        norm_eps_ = file.get_float("smollm3.attention.layer_norm_rms_epsilon");
        if (!(rope_theta_ > 1.0) || !(norm_eps_ > 0.0 && norm_eps_ < 1.0))
            smol::fail(file.name(), ": expected rope.freq_base > 1 and 0 < rms epsilon < 1, found ", rope_theta_, " and ",
                       norm_eps_);

        const smol::gguf::TensorInfo& embedding = file.tensor("token_embd.weight");
        if (embedding.shape.size() != 2 || embedding.shape[0] != d_model_)
            smol::fail(file.name(), ": token_embd.weight: expected [", d_model_, ", n_vocab], found ",
                       embedding.shape_string());
        n_vocab_ = bounded(file, "token_embd.weight rows", embedding.shape[1], 1, 1 << 20);
        embedding_ = matrix(file, "token_embd.weight", d_model_, n_vocab_);  // also the tied LM head
        output_norm_ = vector(file, "output_norm.weight", d_model_);
        const int d_q = n_heads_ * head_dim_, d_kv = n_kv_heads_ * head_dim_;
        for (int il = 0; il < n_layers_; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            Layer layer;
            layer.attn_norm = vector(file, p + "attn_norm.weight", d_model_);
            layer.wq = matrix(file, p + "attn_q.weight", d_model_, d_q);
            layer.wk = matrix(file, p + "attn_k.weight", d_model_, d_kv);
            layer.wv = matrix(file, p + "attn_v.weight", d_model_, d_kv);
            layer.wo = matrix(file, p + "attn_output.weight", d_q, d_model_);
            layer.ffn_norm = vector(file, p + "ffn_norm.weight", d_model_);
            layer.gate = matrix(file, p + "ffn_gate.weight", d_model_, d_ffn_);
            layer.up = matrix(file, p + "ffn_up.weight", d_model_, d_ffn_);
            layer.down = matrix(file, p + "ffn_down.weight", d_ffn_, d_model_);
            layers_.push_back(std::move(layer));
        }
    }

    int n_vocab() const { return n_vocab_; }
    int n_layers() const { return n_layers_; }
    static bool uses_rope(int il) { return (il + 1) % 4 != 0; }  // docs/smollm3.md: every 4th layer is NoPE

    // Logits after each token of one sequence from position 0: [n_tokens, n_vocab].
    RowMatrix logits(std::span<const std::int32_t> tokens, const Float64Options& options = {}) const {
        const int n = int(tokens.size());
        if (n == 0) smol::fail("Float64Transformer::logits: expected at least one token");
        RowMatrix x(n, d_model_);  // [n_tokens, d_model] the residual stream
        for (int t = 0; t < n; ++t) {
            if (tokens[std::size_t(t)] < 0 || tokens[std::size_t(t)] >= n_vocab_)
                smol::fail("Float64Transformer::logits: token ", tokens[std::size_t(t)], " at ", t,
                           " is outside the vocabulary of ", n_vocab_);
            x.row(t) = embedding_.row(tokens[std::size_t(t)]);
        }
        const Rotation rotation = rotation_for(n, options);
        for (int il = 0; il < n_layers_; ++il) {
            const Layer& w = layers_[std::size_t(il)];
            const RowMatrix h = rmsnorm(x, w.attn_norm);
            RowMatrix q = h * w.wq.transpose();  // [n, n_heads * head_dim]
            RowMatrix k = h * w.wk.transpose();  // [n, n_kv_heads * head_dim]
            RowMatrix v = h * w.wv.transpose();
            if (uses_rope(il)) {
                rotate(q, n_heads_, rotation);
                rotate(k, n_kv_heads_, rotation);
            }
            if (options.round_cache) {
                round_rows(k, options.cache_types.keys);
                round_rows(v, options.cache_types.values);
                if (options.cache_types.keys == smol::KvType::q4_0) round_queries(q);
            }
            x.noalias() += attention(q, k, v) * w.wo.transpose();
            const RowMatrix f = rmsnorm(x, w.ffn_norm);
            const RowMatrix gate = f * w.gate.transpose(), up = f * w.up.transpose();
            const RowMatrix act = (gate.array() / (1.0 + (-gate.array()).exp()) * up.array()).matrix();  // silu(g) * u
            x.noalias() += act * w.down.transpose();
        }
        return rmsnorm(x, output_norm_) * embedding_.transpose();
    }

private:
    struct Layer {
        Eigen::RowVectorXd attn_norm, ffn_norm;  // [d_model]
        RowMatrix wq, wk, wv;                    // [n_heads or n_kv_heads * head_dim, d_model]
        RowMatrix wo;                            // [d_model, n_heads * head_dim]
        RowMatrix gate, up;                      // [d_ffn, d_model]
        RowMatrix down;                          // [d_model, d_ffn]
    };
    // cos and sin of every (position, pair), magnitude included: [n_tokens, n_rot / 2].
    struct Rotation {
        RowMatrix cos, sin;
    };

    static int bounded(const smol::gguf::File& file, const char* what, std::int64_t value, std::int64_t low,
                       std::int64_t high) {
        if (value < low || value > high)
            smol::fail(file.name(), ": ", what, ": expected ", low, "..", high, ", found ", value);
        return int(value);
    }

    // A ggml [ne0 = in, ne1 = out] tensor as an [out, in] double matrix, dequantized row by row.
    static RowMatrix matrix(const smol::gguf::File& file, const std::string& name, int in, int out) {
        const smol::gguf::TensorInfo& t = file.tensor(name);
        if (t.shape.size() != 2 || t.shape[0] != in || t.shape[1] != out)
            smol::fail(file.name(), ": ", name, ": expected shape [", in, ", ", out, "], found ", t.shape_string());
        RowMatrix m(out, in);
        std::vector<float> row(static_cast<std::size_t>(in));
        for (int r = 0; r < out; ++r) {
            smol::dequantize_row(t.type, t.data + std::size_t(r) * t.row_bytes(), row.data(), in);
            for (int c = 0; c < in; ++c) m(r, c) = double(row[std::size_t(c)]);
        }
        return m;
    }

    static Eigen::RowVectorXd vector(const smol::gguf::File& file, const std::string& name, int n) {
        const smol::gguf::TensorInfo& t = file.tensor(name);
        if (t.shape.size() != 1 || t.shape[0] != n)
            smol::fail(file.name(), ": ", name, ": expected shape [", n, "], found ", t.shape_string());
        std::vector<float> values(static_cast<std::size_t>(n));
        smol::dequantize_row(t.type, t.data, values.data(), n);
        Eigen::RowVectorXd v(n);
        for (int i = 0; i < n; ++i) v[i] = double(values[std::size_t(i)]);
        return v;
    }

    // x / sqrt(mean(x^2) + eps) * w, row by row.
    RowMatrix rmsnorm(const RowMatrix& x, const Eigen::RowVectorXd& w) const {
        const Eigen::ArrayXd inv_rms = ((x.array().square().rowwise().sum() / double(d_model_)) + norm_eps_).rsqrt();
        return ((x.array().colwise() * inv_rms).rowwise() * w.array()).matrix();
    }

    // Pair j of position p turns by p * theta^(-2j / n_rot). With YaRN (llama.cpp's rope_yarn and
    // ggml_rope_yarn_corr_dims): pairs below `low` keep that angle (extrapolate), pairs above
    // `high` take it divided by F (interpolate), a linear ramp between; cos and sin are scaled by
    // 1 + 0.1 ln F.
    Rotation rotation_for(int n_tokens, const Float64Options& options) const {
        const int half = n_rot_ / 2;
        const bool yarn = options.yarn_factor != 1.0;
        double low = 0.0, high = 0.0, magnitude = 1.0;
        if (yarn) {
            if (!(options.yarn_factor > 1.0) || options.yarn_original_context <= 0)
                smol::fail("Float64Transformer: YaRN needs a factor above 1 and an original context, found ",
                           options.yarn_factor, " and ", options.yarn_original_context);
            const auto pair_for_turns = [&](double turns) {
                return n_rot_ * std::log(options.yarn_original_context / (turns * 2.0 * std::numbers::pi)) /
                       (2.0 * std::log(rope_theta_));
            };
            low = std::max(0.0, std::floor(pair_for_turns(32.0)));                   // beta_fast
            high = std::min(double(n_rot_ - 1), std::ceil(pair_for_turns(1.0)));     // beta_slow
            magnitude = 1.0 + 0.1 * std::log(options.yarn_factor);
        }
        Rotation r{RowMatrix(n_tokens, half), RowMatrix(n_tokens, half)};
        for (int j = 0; j < half; ++j) {
            const double frequency = std::pow(rope_theta_, -2.0 * j / n_rot_);
            double extrapolated_share = 1.0;  // 1: the plain angle; 0: the angle divided by F
            if (yarn) {
                const double y = (j - low) / std::max(0.001, high - low);
                extrapolated_share = 1.0 - std::clamp(y, 0.0, 1.0);
            }
            for (int p = 0; p < n_tokens; ++p) {
                const double plain = p * frequency;
                const double angle =
                    yarn ? plain / options.yarn_factor * (1.0 - extrapolated_share) + plain * extrapolated_share : plain;
                r.cos(p, j) = std::cos(angle) * magnitude;
                r.sin(p, j) = std::sin(angle) * magnitude;
            }
        }
        return r;
    }

    // Interleaved pairs (2j, 2j + 1) of each head (llama.cpp's NORM mode, which GGUF's permuted
    // Q and K rows need): (a, b) -> (a cos - b sin, a sin + b cos).
    void rotate(RowMatrix& x, int n_heads, const Rotation& r) const {
        for (Eigen::Index t = 0; t < x.rows(); ++t)
            for (int h = 0; h < n_heads; ++h)
                for (int j = 0; j < n_rot_ / 2; ++j) {
                    double& a = x(t, h * head_dim_ + 2 * j);
                    double& b = x(t, h * head_dim_ + 2 * j + 1);
                    const double c = r.cos(t, j), s = r.sin(t, j), a0 = a;
                    a = a0 * c - b * s;
                    b = a0 * s + b * c;
                }
    }

    // Each head's row as the cache type stores it (through float, as an engine's activations are).
    void round_rows(RowMatrix& x, smol::KvType type) const {
        if (type != smol::KvType::f16 && head_dim_ % smol::QK8_0 != 0)
            smol::fail("Float64Transformer: a quantized cache needs head_dim a multiple of ", smol::QK8_0, ", found ",
                       head_dim_);
        std::vector<float> row(static_cast<std::size_t>(head_dim_));
        std::vector<smol::BlockQ8_0> q8(static_cast<std::size_t>(head_dim_ / smol::QK8_0));
        std::vector<smol::BlockQ4_0> q4(static_cast<std::size_t>(head_dim_ / smol::QK4_0));
        for (Eigen::Index t = 0; t < x.rows(); ++t)
            for (Eigen::Index h = 0; h < x.cols() / head_dim_; ++h) {
                auto head = x.row(t).segment(h * head_dim_, head_dim_);
                for (int i = 0; i < head_dim_; ++i) row[std::size_t(i)] = float(head[i]);
                switch (type) {
                    case smol::KvType::f16:
                        for (float& value : row) value = smol::fp16_to_f32(smol::f32_to_fp16(value));
                        break;
                    case smol::KvType::q8_0:
                        smol::quantize_row_q8_0(row.data(), q8.data(), head_dim_);
                        smol::dequantize_row(smol::TensorType::Q8_0, q8.data(), row.data(), head_dim_);
                        break;
                    case smol::KvType::q4_0:
                        smol::quantize_row_q4_0(row.data(), q4.data(), head_dim_);
                        smol::dequantize_row(smol::TensorType::Q4_0, q4.data(), row.data(), head_dim_);
                        break;
                }
                for (int i = 0; i < head_dim_; ++i) head[i] = double(row[std::size_t(i)]);
            }
    }

    // Queries meeting Q4_0 keys in 8 bits per block of 32, as llama.cpp's Q8_0 rounds them
    // (d = amax / 127, q = round(x / d)) but with the scale kept in float, not fp16: an engine's
    // choice that moves scores by up to 2^-11 of a block's share, which would otherwise dominate.
    static void round_queries(RowMatrix& q) {
        for (Eigen::Index t = 0; t < q.rows(); ++t)
            for (Eigen::Index b = 0; b + smol::QK8_0 <= q.cols(); b += smol::QK8_0) {
                auto block = q.row(t).segment(b, smol::QK8_0);
                float amax = 0.0f;
                for (int i = 0; i < smol::QK8_0; ++i) amax = std::max(amax, std::fabs(float(block[i])));
                const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
                for (int i = 0; i < smol::QK8_0; ++i) block[i] = double(d * std::nearbyint(float(block[i]) * inverse));
            }
    }

    // Causal grouped-query attention: query head h reads KV head h / (n_heads / n_kv_heads);
    // softmax(q k^T / sqrt(head_dim)) v over positions up to its own. Returns [n, n_heads * head_dim].
    RowMatrix attention(const RowMatrix& q, const RowMatrix& k, const RowMatrix& v) const {
        const Eigen::Index n = q.rows();
        const int group = n_heads_ / n_kv_heads_;
        const double scale = 1.0 / std::sqrt(double(head_dim_));
        RowMatrix out(n, q.cols());
        for (int h = 0; h < n_heads_; ++h) {
            const int g = h / group;
            RowMatrix scores = q.middleCols(h * head_dim_, head_dim_) * k.middleCols(g * head_dim_, head_dim_).transpose();
            scores *= scale;  // [n, n] query row t, key column j
            for (Eigen::Index t = 0; t < n; ++t) {
                auto row = scores.row(t);
                row.tail(n - t - 1).setConstant(-INFINITY);  // positions after t are not visible
                const double max = row.head(t + 1).maxCoeff();
                row = (row.array() - max).exp();
                row /= row.sum();
            }
            out.middleCols(h * head_dim_, head_dim_).noalias() = scores * v.middleCols(g * head_dim_, head_dim_);
        }
        return out;
    }

    int n_layers_ = 0, d_model_ = 0, d_ffn_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, n_rot_ = 0, n_vocab_ = 0;
    double rope_theta_ = 0.0, norm_eps_ = 0.0;
    RowMatrix embedding_;             // [n_vocab, d_model] token embeddings and the tied LM head
    Eigen::RowVectorXd output_norm_;  // [d_model]
    std::vector<Layer> layers_;
};

}  // namespace smol_test
