#pragma once
// The SmolLM3 forward pass for one compiled config, top to bottom in one place.
//
// A call processes a batch of tokens from one or more sequences (each with its own KV cache):
// prompt processing and single-token decode are the same code path with a different batch.

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/error.hpp"
#include "smol/model/config.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/model/weights.hpp"
#include "smol/ops/attention.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/ops/rmsnorm.hpp"
#include "smol/ops/rope.hpp"
#include "smol/quant/reference.hpp"

namespace smol {

template <class Config>
class Transformer final : public Model {
public:
    Transformer(gguf::File file, const LoadOptions& options)
        : Model(std::move(file), options.threads),
          weights_(bind_weights<Config>(this->file(), options.repack, options.threads)),
          max_batch_(options.max_batch) {
        if (max_batch_ <= 0) fail("load options: expected a positive batch size, found ", max_batch_);
        info_ = describe<Config>(this->file(), weights_.matrix_bytes, {weights_.layer_int8_macs, weights_.head_int8_macs});
        info_.rope_scaling = resolve_rope_scaling(Config::hp, options.rope_scaling, options.context,
                                                  &info_.rope_scaling_automatic);
        info_.max_context = info_.rope_scaling.yarn() ? Config::hp.max_yarn_context : Config::hp.max_context;
        check_kv_head_dim(options.cache_types.keys, Config::head_dim);
        check_kv_head_dim(options.cache_types.values, Config::head_dim);
        info_.cache_types = options.cache_types;
        const std::size_t n = std::size_t(max_batch_);
        x_.resize(n * Config::d_model);
        xn_.resize(n * Config::d_model);
        q_.resize(n * Config::d_q);
        k_.resize(n * Config::d_kv);
        v_.resize(n * Config::d_kv);
        att_.resize(n * Config::d_q);
        hidden_.resize(n * Config::d_ffn);
        positions_.resize(n);
        logit_rows_.resize(n * Config::d_model);
    }

    using Model::make_cache;
    KvCache make_cache(int context, KvCacheTypes types) const override {
        if (context <= 0) context = kDefaultContext;
        if (context > info_.max_context) {
            if (!info_.rope_scaling.yarn() && context <= Config::hp.max_yarn_context)
                fail("context of ", context, " tokens requested, but ", Config::name, " was trained for ",
                     Config::hp.max_context, "; YaRN reaches ", Config::hp.max_yarn_context,
                     " (load with LoadOptions::context, or --rope-scaling yarn)");
            if (!info_.rope_scaling.yarn() && Config::hp.max_yarn_context > info_.max_context)
                fail("context of ", context, " tokens requested, but ", Config::name, " supports at most ",
                     info_.max_context, " (", Config::hp.max_yarn_context, " with YaRN)");
            fail("context of ", context, " tokens requested, but ", Config::name, " supports at most ", info_.max_context,
                 info_.rope_scaling.yarn() ? " with YaRN" : "");
        }
        return KvCache(Config::n_layers, Config::n_kv_heads, Config::head_dim, context, types);
    }

    void forward(std::span<const SequenceBatch> batch, float* logits) override {
        for (const auto& s : batch) {
            if (!s.cache) fail("forward: a sequence in the batch has no KV cache");
            if (s.cache->n_layers() != Config::n_layers || s.cache->n_kv_heads() != Config::n_kv_heads ||
                s.cache->head_dim() != Config::head_dim)
                fail("forward: KV cache shape does not match ", Config::name);
            s.cache->reserve_positions(s.cache->size(), int(s.tokens.size()));
            for (std::int32_t id : s.tokens)
                if (id < 0 || id >= Config::n_vocab)
                    fail("forward: token id ", id, " is outside the vocabulary [0, ", Config::n_vocab, ")");
        }
        // Split the batch into chunks of at most max_batch tokens; a sequence may straddle two
        // chunks, since each chunk commits its positions before the next one runs.
        std::vector<Segment> chunk;
        int chunk_tokens = 0;
        for (const auto& s : batch) {
            std::size_t done = 0;
            while (done < s.tokens.size()) {
                const std::size_t take = std::min(s.tokens.size() - done, std::size_t(max_batch_ - chunk_tokens));
                const bool last_piece = done + take == s.tokens.size();
                chunk.push_back({s.cache, s.tokens.subspan(done, take), s.all_logits ? LogitRows::All
                                                                         : last_piece ? LogitRows::Last
                                                                                      : LogitRows::None});
                chunk_tokens += int(take);
                done += take;
                if (chunk_tokens == max_batch_) {
                    logits = run_chunk(chunk, chunk_tokens, logits);
                    chunk.clear();
                    chunk_tokens = 0;
                }
            }
        }
        if (chunk_tokens) run_chunk(chunk, chunk_tokens, logits);
    }

    const ModelWeights& weights() const { return weights_; }

private:
    enum class LogitRows { None, Last, All };
    struct Segment {  // contiguous tokens of one sequence inside a chunk
        KvCache* cache;
        std::span<const std::int32_t> tokens;
        LogitRows logit_rows;
    };

    // Runs one chunk and writes its logit rows at `logits`; returns the end of what it wrote.
    float* run_chunk(const std::vector<Segment>& segments, int n_tokens, float* logits) {
        constexpr int d = Config::d_model;
        // x: [n_tokens, d_model] token embeddings (one dequantized row each)
        int t = 0;
        for (const auto& s : segments)
            for (std::size_t i = 0; i < s.tokens.size(); ++i, ++t) {
                positions_[t] = s.cache->size() + int(i);
                const auto& e = weights_.token_embd;
                dequantize_row(e.type, e.data + std::size_t(s.tokens[i]) * e.row_bytes, x_.data() + std::size_t(t) * d, d);
            }
        rope_.compute(positions_.data(), n_tokens, Config::head_dim, Config::hp.rope_theta, info_.rope_scaling);

        [&]<std::size_t... L>(std::index_sequence<L...>) {
            (layer<Config::uses_rope(int(L))>(int(L), segments, n_tokens), ...);
        }(std::make_index_sequence<Config::n_layers>{});

        for (const auto& s : segments) s.cache->commit_positions(int(s.tokens.size()));

        // Final norm and the tied LM head, only for the rows whose logits are wanted.
        // logit_rows_: [n_wanted, d_model]
        std::int64_t n_wanted = 0;
        t = 0;
        for (const auto& s : segments) {
            const int n = int(s.tokens.size());
            const int first = s.logit_rows == LogitRows::All ? 0 : s.logit_rows == LogitRows::Last ? n - 1 : n;
            for (int i = first; i < n; ++i, ++n_wanted)
                std::memcpy(logit_rows_.data() + n_wanted * d, x_.data() + std::size_t(t + i) * d, d * sizeof(float));
            t += n;
        }
        if (n_wanted == 0) return logits;
        rmsnorm(logit_rows_.data(), weights_.output_norm.data(), logit_rows_.data(), n_wanted, d, Config::hp.norm_eps,
                threads_);
        matmul(weights_.token_embd, logit_rows_.data(), n_wanted, logits, scratch_, threads_);  // [n_wanted, n_vocab]
        return logits + n_wanted * Config::n_vocab;
    }

    // One decoder layer: pre-norm attention and pre-norm SwiGLU MLP, each with a residual add.
    template <bool kRope>
    void layer(int il, const std::vector<Segment>& segments, int n_tokens) {
        constexpr int d = Config::d_model;
        const LayerWeights& w = weights_.layers[std::size_t(il)];
        const float eps = Config::hp.norm_eps;

        rmsnorm(x_.data(), w.attn_norm.data(), xn_.data(), n_tokens, d, eps, threads_);  // xn: [n_tokens, d_model]
        project(xn_.data(), n_tokens, {{&w.attn_q, q_.data()},    // q: [n_tokens, n_heads * head_dim]
                                       {&w.attn_k, k_.data()},    // k: [n_tokens, n_kv_heads * head_dim]
                                       {&w.attn_v, v_.data()}});  // v: [n_tokens, n_kv_heads * head_dim]
        if constexpr (kRope) {
            apply_rope(q_.data(), n_tokens, Config::n_heads, Config::head_dim, rope_, threads_);
            apply_rope(k_.data(), n_tokens, Config::n_kv_heads, Config::head_dim, rope_, threads_);
        }
        std::int64_t t = 0;
        for (const auto& s : segments) {  // att: [n_tokens, n_heads * head_dim]
            const std::int64_t n = std::int64_t(s.tokens.size());
            const int first = s.cache->size();
            kv_store(s.cache->layer(il), first, k_.data() + t * Config::d_kv, v_.data() + t * Config::d_kv, n, threads_);
            attention(s.cache->layer(il), first, q_.data() + t * Config::d_q, att_.data() + t * Config::d_q, n, Config::n_heads,
                      kv_kernels::attention_kernels(), threads_);
            t += n;
        }
        // x: [n_tokens, d_model] += att W_o (the residual, added as the products are written)
        matmul_add(w.attn_output, att_.data(), n_tokens, x_.data(), scratch_, threads_);

        rmsnorm(x_.data(), w.ffn_norm.data(), xn_.data(), n_tokens, d, eps, threads_);  // xn: [n_tokens, d_model]
        // x += hidden W_down, hidden: [n_tokens, d_ffn] = silu(xn W_gate) * (xn W_up) (in hidden_
        // only where it is not handed to W_down quantized)
        matmul_mlp_add(w.ffn_gate, w.ffn_up, w.ffn_down, xn_.data(), n_tokens, hidden_.data(), x_.data(), scratch_, threads_);
    }

    // Several projections of the same input: one fused matmul when their activation formats
    // agree (always, for Q4_K_M files), else one call each.
    void project(const float* x, int n_tokens, std::initializer_list<MatmulTarget> targets) {
        bool same_format = true;
        for (const auto& t : targets)
            same_format &= weight_row(t.w->type).activations == weight_row(targets.begin()->w->type).activations;
        if (same_format)
            return matmul(std::span<const MatmulTarget>(targets.begin(), targets.size()), x, n_tokens, scratch_, threads_);
        for (const auto& t : targets) matmul(*t.w, x, n_tokens, t.y, scratch_, threads_);
    }

    ModelWeights weights_;
    int max_batch_;
    MatmulScratch scratch_;
    RopeTable rope_;
    AlignedFloats x_;      // [max_batch, d_model] residual stream
    AlignedFloats xn_;     // [max_batch, d_model] normed input
    AlignedFloats q_;      // [max_batch, n_heads * head_dim]
    AlignedFloats k_;      // [max_batch, n_kv_heads * head_dim]
    AlignedFloats v_;      // [max_batch, n_kv_heads * head_dim]
    AlignedFloats att_;    // [max_batch, n_heads * head_dim]
    AlignedFloats hidden_;  // [max_batch, d_ffn] the MLP's gated hidden state
    std::vector<std::int32_t> positions_;  // [max_batch]
    AlignedFloats logit_rows_;  // [max_batch, d_model] final hidden states whose logits are wanted
};

}  // namespace smol
