#pragma once
// Binds the tensors of a GGUF file to the weights of a SmolLM3-architecture network, checking
// every name, shape and type against the compiled config. Weights stay in the mapped file, except
// the layer matrices whose type has a row-group layout (quant/row_groups.hpp): unless the caller
// says no, those are regrouped into memory of their own at load, for decode, and their mapped
// pages let go.

#include <algorithm>
#include <string>
#include <vector>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/error.hpp"
#include "smol/core/threads.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/model/config.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/quant/type_table.hpp"

namespace smol {

struct LayerWeights {
    std::vector<float> attn_norm;  // [d_model]
    MatrixView attn_q;             // [d_q rows, d_model cols]
    MatrixView attn_k;             // [d_kv, d_model]
    MatrixView attn_v;             // [d_kv, d_model]
    MatrixView attn_output;        // [d_model, d_q]
    std::vector<float> ffn_norm;   // [d_model]
    MatrixView ffn_gate;           // [d_ffn, d_model]
    MatrixView ffn_up;             // [d_ffn, d_model]
    MatrixView ffn_down;           // [d_model, d_ffn]
};

struct ModelWeights {
    MatrixView token_embd;            // [n_vocab, d_model]; also the LM head (tied embeddings)
    std::vector<float> output_norm;   // [d_model]
    std::vector<LayerWeights> layers;
    std::uint64_t matrix_bytes = 0;   // bytes of every matrix read once per token (for GB/s)
    // Integer multiply-adds per token (rows x cols) of the matrices multiplied with int8
    // activations (every quantized type; float matrices are left out): all layers', the LM head's.
    std::uint64_t layer_int8_macs = 0;
    std::uint64_t head_int8_macs = 0;
    AlignedBuffer row_groups;         // the regrouped matrices (their views' `groups` point here)
};

namespace detail {

// rows x cols for a matrix multiplied with int8 activations, 0 for a float one.
inline std::uint64_t int8_macs(const MatrixView& m) {
    return weight_row(m.type).activations == TensorType::F32 ? 0 : std::uint64_t(m.rows) * std::uint64_t(m.cols);
}

inline const gguf::TensorInfo& expect_tensor(const gguf::File& file, const std::string& name,
                                             std::vector<std::int64_t> shape) {
    const gguf::TensorInfo& t = file.tensor(name);
    if (t.shape != shape) {
        gguf::TensorInfo expected;
        expected.shape = shape;
        fail(file.name(), ": tensor '", name, "' (entry at offset ", t.info_offset, "): expected shape ",
             expected.shape_string(), ", found ", t.shape_string());
    }
    if (!is_weight_type(t.type))
        fail(file.name(), ": tensor '", name, "': type ", type_name(t.type), " is not supported (expected one of ",
             supported_weight_types(), ")");
    return t;
}

inline MatrixView matrix(const gguf::File& file, const std::string& name, std::int64_t rows, std::int64_t cols) {
    const auto& t = expect_tensor(file, name, {cols, rows});
    return MatrixView{t.type, t.data, rows, cols, t.row_bytes()};
}

// Norm weights are tiny: held as floats whatever the file stores.
inline std::vector<float> vector(const gguf::File& file, const std::string& name, std::int64_t n) {
    const auto& t = expect_tensor(file, name, {n});
    std::vector<float> out(static_cast<std::size_t>(n));
    dequantize_row(t.type, t.data, out.data(), n);
    return out;
}

}  // namespace detail

// Regroups every matrix whose type has a row-group layout, whose rows come in whole groups and
// whose type the running kernel set decodes in groups with a kernel of its own (all x86 sets; no
// ARM set yet) into w.row_groups, points its view there, and tells the kernel its mapped pages
// will not be read again (matmul reads only the groups), so the weights are held once. The copy
// runs on `threads` (thread_team).
inline void make_row_groups(ModelWeights& w, const gguf::File& file, int threads = 0) {
    std::vector<MatrixView*> grouped;
    const auto consider = [&grouped](MatrixView* m) {
        if (weight_row(m->type).row_groups.exists() && kernels().has_own_row_group_kernel(m->type) &&
            m->rows % kGroupRows == 0 && m->rows > 0)
            grouped.push_back(m);
    };
    // The LM head too: the embedding lookup still reads its rows as stored, a row per token,
    // paged back in from the file as needed.
    consider(&w.token_embd);
    for (LayerWeights& l : w.layers)
        for (MatrixView* m : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            consider(m);
    if (grouped.empty()) return;
    std::vector<std::size_t> offset(grouped.size() + 1, 0);  // bytes, each matrix 64-byte aligned
    for (std::size_t i = 0; i < grouped.size(); ++i)
        offset[i + 1] = offset[i] + (std::size_t(grouped[i]->rows / kGroupRows) * grouped[i]->group_bytes() + 63) / 64 * 64;
    // In huge pages (AlignedBuffer): prompts and decode stream every group, and in 4 KiB pages each
    // 4 KiB read may miss the TLB; under a hypervisor's nested page tables that walk is slow enough
    // to halve decode and short prompts, differently in each process (docs/performance.md).
    w.row_groups.reset(offset.back());
    // Matrix by matrix, each let go as soon as it is copied: the process never holds much more
    // than the weights once.
    for (std::size_t i = 0; i < grouped.size(); ++i) {
        MatrixView& m = *grouped[i];
        const TypeRow& row = weight_row(m.type);
        const std::int64_t blocks = m.cols / std::int64_t(row.block_elements);
        const std::size_t group_bytes = m.group_bytes();
        std::uint8_t* groups = w.row_groups.data() + offset[i];
#pragma omp parallel for schedule(static) num_threads(thread_team(threads))
        for (std::int64_t g = 0; g < m.rows / kGroupRows; ++g)
            row.row_groups.interleave(m.data + std::size_t(g * kGroupRows) * m.row_bytes, m.row_bytes, blocks,
                                      groups + std::size_t(g) * group_bytes);
        m.groups = groups;
        file.memory().wont_need(std::size_t(m.data - file.memory().data()), std::size_t(m.rows) * m.row_bytes);
    }
}

// group_rows: regroup the matrices that have a row-group layout (make_row_groups), on `threads`.
template <class Config>
ModelWeights bind_weights(const gguf::File& file, bool group_rows = true, int threads = 0) {
    ModelWeights w;
    w.token_embd = detail::matrix(file, "token_embd.weight", Config::n_vocab, Config::d_model);
    if (file.find_tensor("output.weight"))
        fail(file.name(), ": found 'output.weight', but ", Config::name, " ties its LM head to token_embd.weight");
    w.output_norm = detail::vector(file, "output_norm.weight", Config::d_model);
    w.matrix_bytes = w.token_embd.row_bytes * std::uint64_t(Config::n_vocab);
    w.head_int8_macs = detail::int8_macs(w.token_embd);
    for (int il = 0; il < Config::n_layers; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights l;
        l.attn_norm = detail::vector(file, p + "attn_norm.weight", Config::d_model);
        l.attn_q = detail::matrix(file, p + "attn_q.weight", Config::d_q, Config::d_model);
        l.attn_k = detail::matrix(file, p + "attn_k.weight", Config::d_kv, Config::d_model);
        l.attn_v = detail::matrix(file, p + "attn_v.weight", Config::d_kv, Config::d_model);
        l.attn_output = detail::matrix(file, p + "attn_output.weight", Config::d_model, Config::d_q);
        l.ffn_norm = detail::vector(file, p + "ffn_norm.weight", Config::d_model);
        l.ffn_gate = detail::matrix(file, p + "ffn_gate.weight", Config::d_ffn, Config::d_model);
        l.ffn_up = detail::matrix(file, p + "ffn_up.weight", Config::d_ffn, Config::d_model);
        l.ffn_down = detail::matrix(file, p + "ffn_down.weight", Config::d_model, Config::d_ffn);
        for (const MatrixView* m : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
            w.matrix_bytes += m->row_bytes * std::uint64_t(m->rows);
            w.layer_int8_macs += detail::int8_macs(*m);
        }
        w.layers.push_back(std::move(l));
    }
    if (group_rows) make_row_groups(w, file, threads);
    return w;
}

}  // namespace smol
