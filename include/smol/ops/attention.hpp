#pragma once
// Causal grouped-query attention of new tokens over a sequence's KV cache (any cache type).
//
// Positions are cut into fixed chunks of kAttentionChunk, counted from position 0. For each
// query row a chunk gives a partial softmax (its max score, the sum of its weights and the
// weighted sum of its values), and the partials are merged in chunk order, as flash attention
// does; no score matrix longer than one chunk is ever held. Prompts run blocks of tokens x KV
// heads in parallel, each walking its chunks in turn; decoding, with too few rows to keep the
// threads busy, runs every (KV head, chunk) in parallel (flash decoding) and merges after, reading
// the cache rows in place where prompts first turn a step of them into floats for all their
// rows. Both do the same arithmetic for a row, so a token's output is the same whatever its
// batch, and whatever the number of threads.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "smol/core/threads.hpp"
#include "smol/ops/kv_kernels.hpp"
#include "smol/ops/kv_layout.hpp"

namespace smol {

inline constexpr int kAttentionChunk = 256;    // positions per partial softmax
inline constexpr int kAttentionTokenBlock = 8;  // prompt tokens whose rows share each key and value read
inline constexpr int kAttentionStep = 32;       // cache rows turned into floats at a time (16 KB at head_dim 128)
inline constexpr int kInPlaceRows = 4;          // query rows up to which cache rows are read in place

// Writes the keys and values of `n_tokens` new tokens at positions first..first+n-1.
// k, v: [n_tokens, n_kv_heads * head_dim]
// `threads`: the work's thread count (thread_team).
inline void kv_store(const KvLayer& cache, int first, const float* k, const float* v, std::int64_t n_tokens,
                     int threads = 0) {
    const int n_kv = cache.n_kv_heads, hd = cache.head_dim;
#pragma omp parallel for collapse(2) schedule(static) num_threads(thread_team(threads)) if (n_tokens > 1)
    for (std::int64_t t = 0; t < n_tokens; ++t)
        for (int g = 0; g < n_kv; ++g) {
            kv_kernels::store_row(cache.key_type, k + (t * n_kv + g) * hd, cache.key_row(g, first + int(t)), hd);
            kv_kernels::store_row(cache.value_type, v + (t * n_kv + g) * hd, cache.value_row(g, first + int(t)), hd);
        }
}

namespace attention_detail {

// One thread's buffers, grown on demand and kept between calls.
struct Scratch {
    std::vector<float> q;       // [rows, head_dim] the query rows of one work item
    std::vector<float> scores;  // [rows, kAttentionChunk] scores, then softmax weights
    std::vector<float> rows;    // [kAttentionStep, head_dim] cache rows as floats
    std::vector<float> acc;     // [rows, head_dim] one chunk's weighted sum of values
    std::vector<float> max, sum;  // [rows] one chunk's max score and sum of weights
    std::vector<float> run_acc, run_max, run_sum;  // the same, merged over the chunks so far
    std::vector<int> visible;   // [rows] how many of the chunk's positions each row sees
    kv_kernels::QueryBuffer q8;  // [rows] the query rows quantized, for Q4_0 keys
    void fit(int n_rows, int head_dim) {
        const std::size_t r = std::size_t(n_rows), hd = std::size_t(head_dim);
        if (q.size() < r * hd) {
            q.resize(r * hd);
            acc.resize(r * hd);
            run_acc.resize(r * hd);
        }
        if (scores.size() < r * kAttentionChunk) scores.resize(r * kAttentionChunk);
        if (rows.size() < kAttentionStep * hd) rows.resize(kAttentionStep * hd);
        if (max.size() < r) {
            max.resize(r);
            sum.resize(r);
            run_max.resize(r);
            run_sum.resize(r);
            visible.resize(r);
        }
    }
};

inline Scratch& thread_scratch() {
    thread_local Scratch scratch;
    return scratch;
}

// The largest of s[0..n), n >= 1: the same value as std::max_element's, from eight running
// maxima, where one chain would wait out vmaxss's latency at each of a chunk's scores (a
// prompt's item has 32 rows of up to kAttentionChunk).
inline float largest(const float* s, int n) {
    float m[8];
    std::fill_n(m, 8, s[0]);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) m[k] = std::max(m[k], s[i + k]);
    for (; i < n; ++i) m[0] = std::max(m[0], s[i]);
    return *std::max_element(m, m + 8);
}

// The partial softmax of chunk `chunk` for n_rows query rows of KV head g: row r sees the
// chunk's first visible[r] positions (at least 1). q: [n_rows, head_dim], and q8 the same rows
// quantized where the keys are Q4_0 (nullptr otherwise); max, sum: [n_rows];
// acc: [n_rows, head_dim].
inline void attend_chunk(const kv_kernels::AttentionKernels& k, const KvLayer& cache, int g, int chunk, const float* q,
                         const kv_kernels::QueryBlocks* q8, int n_rows, const int* visible, float scale, Scratch& s,
                         float* max, float* sum, float* acc) {
    const int hd = cache.head_dim, first = chunk * kAttentionChunk;
    const int n = *std::max_element(visible, visible + n_rows);
    float* scores = s.scores.data();  // [n_rows, kAttentionChunk]
    // A single register tile of rows (decoding) reads the cache rows in place; more rows share
    // one float copy of each step of rows. Both give the same bits. Q4_0 keys are always
    // scored in place, in integers.
    const bool in_place = n_rows <= kInPlaceRows && k.scores_cache && k.accumulate_cache;
    if (q8) k.scores_q4_0(*q8, n_rows, cache.key_row(g, first), n, hd, scale, scores, kAttentionChunk);
    else if (in_place) k.scores_cache(cache.key_type, q, n_rows, cache.key_row(g, first), n, hd, scale, scores, kAttentionChunk);
    else for (int j = 0; j < n; j += kAttentionStep) {
        const int step = std::min(kAttentionStep, n - j);
        k.load_row(cache.key_type, cache.key_row(g, first + j), s.rows.data(), step * hd);  // a head's rows lie in a run
        k.scores(q, n_rows, s.rows.data(), step, hd, scale, scores + j, kAttentionChunk);
    }
    for (int r = 0; r < n_rows; ++r) {
        float* sr = scores + std::size_t(r) * kAttentionChunk;
        max[r] = largest(sr, visible[r]);
        sum[r] = k.softmax_weights(sr, visible[r], max[r]);
        std::fill(sr + visible[r], sr + n, 0.0f);  // positions this row may not see weigh nothing
    }
    std::fill(acc, acc + std::size_t(n_rows) * hd, 0.0f);
    if (in_place) k.accumulate_cache(cache.value_type, scores, kAttentionChunk, n_rows, cache.value_row(g, first), n, hd, acc);
    else for (int j = 0; j < n; j += kAttentionStep) {
        const int step = std::min(kAttentionStep, n - j);
        k.load_row(cache.value_type, cache.value_row(g, first + j), s.rows.data(), step * hd);
        k.accumulate(scores + j, kAttentionChunk, n_rows, s.rows.data(), step, hd, acc);
    }
}

// Folds one chunk's partial (max, sum, acc) into a row's running state, rescaling both to the
// larger max. The first fold, from max = -inf, copies the partial exactly.
inline void merge_partial(float& run_max, float& run_sum, float* run_acc, float max, float sum, const float* acc,
                          int head_dim) {
    const float m = std::max(run_max, max);
    const float a = std::exp(run_max - m), b = std::exp(max - m);
    run_sum = run_sum * a + sum * b;
    for (int i = 0; i < head_dim; ++i) run_acc[i] = run_acc[i] * a + acc[i] * b;
    run_max = m;
}

inline void start_rows(Scratch& s, int n_rows, int head_dim) {
    std::fill(s.run_max.begin(), s.run_max.begin() + n_rows, -INFINITY);
    std::fill(s.run_sum.begin(), s.run_sum.begin() + n_rows, 0.0f);
    std::fill(s.run_acc.begin(), s.run_acc.begin() + std::size_t(n_rows) * head_dim, 0.0f);
}

inline void finish_row(float run_sum, const float* run_acc, float* out, int head_dim) {
    const float inv = 1.0f / run_sum;
    for (int i = 0; i < head_dim; ++i) out[i] = run_acc[i] * inv;
}

}  // namespace attention_detail

namespace attention_detail {

// One attention call: its inputs, and the shapes every work item reads.
struct AttentionCall {
    const KvLayer& cache;
    int first;
    const float* q;
    float* out;
    std::int64_t n_tokens;
    int n_heads;
    const kv_kernels::AttentionKernels& k;
    int team;  // threads of each parallel region (thread_team)
    int n_kv = cache.n_kv_heads, hd = cache.head_dim;
    int group = n_heads / n_kv;  // query heads per KV head: rows that share every cache read
    float scale = 1.0f / std::sqrt(float(hd));
    // Q4_0 keys meet the query rows quantized (kv_int8_scores.hpp), each row once.
    bool int8_keys = cache.key_type == KvType::q4_0;

    int chunks_for(std::int64_t t) const { return (first + int(t)) / kAttentionChunk + 1; }
    // The rows of token t and KV head g: q[t, g * group .. (g + 1) * group - 1]
    const float* q_rows(std::int64_t t, int g) const { return q + (t * n_heads + std::int64_t(g) * group) * hd; }

    // Prompt: each (block of tokens, KV head) walks its chunks, merging as it goes.
    void prompt() const {
        const std::int64_t n_blocks = (n_tokens + kAttentionTokenBlock - 1) / kAttentionTokenBlock;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(team)
        for (std::int64_t b = 0; b < n_blocks; ++b)
            for (int g = 0; g < n_kv; ++g) {
                Scratch& s = thread_scratch();
                const std::int64_t t0 = b * kAttentionTokenBlock;
                const int n_tok = int(std::min<std::int64_t>(kAttentionTokenBlock, n_tokens - t0));
                const int n_rows = n_tok * group;
                s.fit(n_rows, hd);
                for (int i = 0; i < n_tok; ++i)
                    std::copy(q_rows(t0 + i, g), q_rows(t0 + i, g) + std::size_t(group) * hd,
                              s.q.begin() + std::ptrdiff_t(i) * group * hd);
                if (int8_keys) s.q8.quantize(s.q.data(), n_rows, hd);
                const kv_kernels::QueryBlocks block_q8 = s.q8.view();
                start_rows(s, n_rows, hd);
                int* visible = s.visible.data();
                for (int c = 0; c < chunks_for(t0 + n_tok - 1); ++c) {
                    // Tokens before t_from see none of this chunk; the rest see part or all of it.
                    int t_from = 0;
                    while (chunks_for(t0 + t_from) <= c) ++t_from;
                    const int row_from = t_from * group, rows = n_rows - row_from;
                    for (int i = t_from; i < n_tok; ++i)
                        std::fill_n(visible + (i - t_from) * group, group,
                                    std::min(kAttentionChunk, first + int(t0) + i + 1 - c * kAttentionChunk));
                    const kv_kernels::QueryBlocks from_q8 = block_q8.from_row(std::size_t(row_from), hd);
                    attend_chunk(k, cache, g, c, s.q.data() + std::size_t(row_from) * hd, int8_keys ? &from_q8 : nullptr,
                                 rows, visible, scale, s, s.max.data(), s.sum.data(), s.acc.data());
                    for (int r = 0; r < rows; ++r)
                        merge_partial(s.run_max[row_from + r], s.run_sum[row_from + r],
                                      s.run_acc.data() + std::size_t(row_from + r) * hd, s.max[r], s.sum[r],
                                      s.acc.data() + std::size_t(r) * hd, hd);
                }
                for (int r = 0; r < n_rows; ++r)
                    finish_row(s.run_sum[r], s.run_acc.data() + std::size_t(r) * hd,
                               out + (t0 * n_heads + std::int64_t(g) * group) * hd + std::size_t(r / group) * n_heads * hd +
                                   std::size_t(r % group) * hd,
                               hd);
            }

    }

    // Decode: every (token, KV head, chunk) is a work item; partials land in `partials`, then
    // each row merges its chunks in order.
    void decode() const {
        const std::size_t partial_floats = std::size_t(group) * (hd + 2);  // per item: max, sum, acc of each row
        std::vector<std::int64_t> item_start(std::size_t(n_tokens) + 1, 0);  // items before token t
        for (std::int64_t t = 0; t < n_tokens; ++t) item_start[t + 1] = item_start[t] + std::int64_t(n_kv) * chunks_for(t);
        thread_local std::vector<float> partials;
        if (partials.size() < std::size_t(item_start.back()) * partial_floats)
            partials.resize(std::size_t(item_start.back()) * partial_floats);
        float* const partial_base = partials.data();
        const std::int64_t n_items = item_start.back();
        thread_local kv_kernels::QueryBuffer quantized;  // [n_tokens * n_heads] for Q4_0 keys
        if (int8_keys) quantized.quantize(q, int(n_tokens) * n_heads, hd);
        const kv_kernels::QueryBlocks all_q8 = quantized.view();  // this thread's buffer, which the team reads

    #pragma omp parallel num_threads(team)
        {
            Scratch& s = thread_scratch();
            s.fit(group, hd);
    #pragma omp for schedule(dynamic, 1)
            for (std::int64_t item = 0; item < n_items; ++item) {
                const std::int64_t t = std::upper_bound(item_start.begin(), item_start.end(), item) - item_start.begin() - 1;
                const int n_chunks = chunks_for(t);
                const int g = int((item - item_start[t]) / n_chunks), c = int((item - item_start[t]) % n_chunks);
                int* visible = s.visible.data();
                std::fill_n(visible, group, std::min(kAttentionChunk, first + int(t) + 1 - c * kAttentionChunk));
                float* p = partial_base + std::size_t(item) * partial_floats;  // [max x group, sum x group, acc x group]
                const kv_kernels::QueryBlocks item_q8 = all_q8.from_row(std::size_t(t * n_heads + std::int64_t(g) * group), hd);
                attend_chunk(k, cache, g, c, q_rows(t, g), int8_keys ? &item_q8 : nullptr, group, visible, scale, s, p,
                             p + group, p + 2 * group);
            }
    #pragma omp for collapse(2) schedule(static)
            for (std::int64_t t = 0; t < n_tokens; ++t)
                for (int g = 0; g < n_kv; ++g) {
                    start_rows(s, group, hd);
                    const int n_chunks = chunks_for(t);
                    for (int c = 0; c < n_chunks; ++c) {
                        const float* p = partial_base + std::size_t(item_start[t] + std::int64_t(g) * n_chunks + c) * partial_floats;
                        for (int r = 0; r < group; ++r)
                            merge_partial(s.run_max[r], s.run_sum[r], s.run_acc.data() + std::size_t(r) * hd, p[r],
                                          p[group + r], p + 2 * group + std::size_t(r) * hd, hd);
                    }
                    for (int r = 0; r < group; ++r)
                        finish_row(s.run_sum[r], s.run_acc.data() + std::size_t(r) * hd,
                                   out + (t * n_heads + std::int64_t(g) * group + r) * hd, hd);
                }
        }
    }
};

}  // namespace attention_detail

// out[t, h] = softmax_j(q[t, h] . K[g, j] * scale) . V[g, j] for j <= first + t, g = h / (n_heads / n_kv_heads).
// q, out: [n_tokens, n_heads * head_dim]. The new tokens' keys and values must already be stored.
// `kernels`: this CPU's set unless a test asks for another; `threads`: the work's thread count
// (thread_team).
inline void attention(const KvLayer& cache, int first, const float* q, float* out, std::int64_t n_tokens, int n_heads,
                      const kv_kernels::AttentionKernels& kernels = kv_kernels::attention_kernels(), int threads = 0) {
    using namespace attention_detail;
    const kv_kernels::AttentionKernels& k =
        cache.head_dim % 32 == 0 ? kernels : *kv_kernels::attention_kernels_for(Isa::scalar);
    const AttentionCall call{cache, first, q, out, n_tokens, n_heads, k, thread_team(threads)};
    if (n_tokens >= kAttentionTokenBlock) call.prompt();
    else call.decode();
}

}  // namespace smol
