#pragma once
// y = W x for a batch of tokens, threaded with OpenMP, on whichever kernel set dispatch.hpp
// chose. Quantized weights meet activations quantized once per call (Q8_K for the k-quants,
// Q8_0 for Q8_0, Q4_0, Q5_0 and Q4_1); float weights meet the float activations as they are.
//
// Work split: decode (one token) is memory-bound, so each thread takes a contiguous run of
// rows and streams kTileRows of them at once with prefetch. Prompts are compute-bound: where the
// kernel set has a GEMM for the weight type (the k-quants on x86, Q6_K on i8mm), the Q8_K
// activations are also packed 16 tokens to a block and a GEMM call's tokens (kGemmShapes: 32,
// or 64 for AMX) meet its row group, so an unpacked weight block serves all of them; otherwise
// tiles take kTileCols tokens at a time. Either way in token blocks small enough that the
// activations of a block stay in L2 while the thread walks its rows. A matrix held as row groups
// (row_groups.hpp) is read through its group kernels for batches the tiles would take, and by the
// GEMMs as it is where the GEMM's set has a group form (AVX2, AVX-VNNI, AVX-512); for the others
// (AMX, ARM) its rows are restored once per call by the thread that multiplies them. Decode,
// prompt and group kernels give the same bits. matmul_gated computes the SwiGLU MLP's gate and
// up projections in one pass and writes only silu(gate) * up; matmul_add adds W x into y (a
// residual) as the GEMM items write their results, so the product is never stored and read back;
// matmul_mlp_add runs the whole MLP, its gated items handing their hidden state to the down
// projection already quantized and packed, so that it never goes to memory as floats either.

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/error.hpp"
#include "smol/core/platform.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/core/threads.hpp"
#include "smol/ops/swiglu.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dispatch.hpp"
#include "smol/quant/packing.hpp"
#include "smol/quant/reference.hpp"

namespace smol {

// A weight matrix as stored: `rows` rows of `row_bytes` bytes, each holding `cols` weights.
// rows = output dim, cols = input dim (ggml ne0; blocks run along it).
// `groups`, when set, is the same matrix regrouped kGroupRows rows at a time in its type's
// row-group layout (row_groups.hpp; rows a multiple of kGroupRows), and matmul reads only it:
// decode through the group kernels, prompts through the group GEMMs or rows restored from it.
struct MatrixView {
    TensorType type;
    const std::uint8_t* data;
    std::int64_t rows;
    std::int64_t cols;
    std::size_t row_bytes;
    const std::uint8_t* groups = nullptr;

    // Bytes of one row group in `groups`.
    std::size_t group_bytes() const {
        const TypeRow& row = weight_row(type);
        return std::size_t(cols) / row.block_elements * row.row_groups.block_bytes;
    }
};

// Reusable buffers: quantized activations, and weight rows restored from row groups for the
// prompt GEMMs (the matrices of one call). They grow only when a call needs more, so a decode
// loop allocates on its first step and never again.
class MatmulScratch {
public:
    MatmulScratch() = default;
    MatmulScratch(const MatmulScratch&) = delete;
    MatmulScratch& operator=(const MatmulScratch&) = delete;
    MatmulScratch(MatmulScratch&&) noexcept = default;
    MatmulScratch& operator=(MatmulScratch&&) noexcept = default;

    // At least `bytes` bytes for activations, 64-byte aligned; contents are not preserved across growth.
    std::uint8_t* bytes(std::size_t bytes) { return activations_.at_least(bytes); }
    std::size_t capacity() const { return activations_.size(); }
    // At least `bytes` bytes for restored weight rows, likewise.
    std::uint8_t* restored_rows(std::size_t bytes) { return rows_.at_least(bytes); }
    // At least `count` floats for a product computed apart (matmul_gated's up projection where the
    // two are not fused, matmul_add's product without GEMMs), likewise.
    float* separate_product(std::size_t count) {
        return reinterpret_cast<float*>(product_.at_least(count * sizeof(float)));
    }
    // At least `bytes` bytes for the packed activations one product hands the next
    // (matmul_mlp_add's hidden state), likewise.
    std::uint8_t* handed_on(std::size_t bytes) { return handed_on_.at_least(bytes); }

private:
    AlignedBuffer activations_;
    AlignedBuffer rows_;
    AlignedBuffer product_;
    AlignedBuffer handed_on_;
};

namespace matmul_detail {

inline constexpr std::int64_t kDecodeRunsPerThread = 16;  // decode's items are handed out in this many runs per thread
inline constexpr std::int64_t kPromptRunsPerThread = 8;   // a prompt's, in this many per thread and token block
inline constexpr std::int64_t kTokenBlock = 64;           // tokens whose activations stay in L2 (token_block_for)
// A GEMM work item's result tile (MatmulRun::item): token_block tokens (at most 96: kTokenBlock
// rounded up to a whole call of AVX-512's 96) of kGemmItemRows rows. 16 rows make each token's
// results one whole 64-byte line of y: with 8, two items wrote halves of the same lines, which
// the first had long lost from L1 (y's rows lie 8 KB apart on the 3B shape, all in one set).
inline constexpr std::int64_t kMaxItemTokens = 96;
inline constexpr std::int64_t kGemmItemRows = 16;
static_assert(kGemmItemRows % kGroupRows == 0 && kGemmItemRows % kTileRows == 0, "items hold whole row groups and GEMM calls");
inline constexpr std::int64_t kParallelQuantizeBlocks = 64;  // below this, one thread quantizes

inline void check_view(const MatrixView& w, std::int64_t n_tokens) {
    const auto traits = tensor_type_traits(std::uint32_t(w.type));
    if (!traits) fail("matmul: unknown tensor type id ", std::uint32_t(w.type));
    if (w.rows < 0 || w.cols < 0 || n_tokens < 0)
        fail("matmul: negative shape (rows ", w.rows, ", cols ", w.cols, ", tokens ", n_tokens, ")");
    const auto block = std::int64_t(traits->block_elements);
    if (w.cols % block != 0)
        fail("matmul: ", traits->name, " rows must hold a multiple of ", block, " weights, got cols = ", w.cols);
    const std::size_t needed = std::size_t(w.cols / block) * traits->block_bytes;
    if (w.row_bytes < needed)
        fail("matmul: ", traits->name, " row of ", w.cols, " weights needs ", needed, " bytes, row_bytes is ",
             w.row_bytes);
    if (w.data == nullptr && w.rows > 0) fail("matmul: weight data is null");
}

// Quantizes x ([n_tokens, cols]) to one row of blocks per token in `out` (rows of `stride`
// bytes), in parallel on `team` threads when there is enough of it to pay for waking them.
inline void quantize_activations(FromFloatFn quantize, std::int64_t block_elements, std::size_t block_bytes,
                                 const float* x, std::int64_t n_tokens, std::int64_t cols, std::uint8_t* out, int team) {
    const std::int64_t per_token = cols / block_elements;
    const std::int64_t total = n_tokens * per_token;
#pragma omp parallel for schedule(static) num_threads(team) if (total >= kParallelQuantizeBlocks)
    for (std::int64_t i = 0; i < total; ++i) {
        const std::int64_t t = i / per_token, b = i % per_token;
        quantize(x + t * cols + b * block_elements, out + std::size_t(i) * block_bytes, block_elements);
    }
}

// One packed block: n <= 16 tokens' QK_K values (token t's at x + t * stride) quantized to Q8_K
// with `quantize` into a buffer on the stack and packed from there (the bytes pack_q8k_x16 makes
// of the quantized rows; tokens past n are zero).
inline void quantize_group(FromFloatFn quantize, const float* x, std::int64_t stride, std::int64_t n, BlockQ8Kx16& out) {
    BlockQ8K rows[kPackedTokens];  // [token]
    for (std::int64_t t = 0; t < n; ++t) quantize(x + t * stride, &rows[t], QK_K);
    pack_block(rows, n, 1, 0, 0, out);
}

// Quantizes x ([n_tokens, cols]) to Q8_K with `quantize` and packs it 16 tokens to a block in
// `out` ([ceil(n_tokens / 16)][cols / QK_K]), a block at a time (quantize_group), so the
// quantized rows never go out to memory and back (the GEMMs read only the packed blocks).
inline void quantize_packed(FromFloatFn quantize, const float* x, std::int64_t n_tokens, std::int64_t cols,
                            BlockQ8Kx16* out, int team) {
    const std::int64_t blocks = cols / QK_K;
    const std::int64_t groups = packed_groups(n_tokens);
#pragma omp parallel for schedule(static) num_threads(team) if (n_tokens * blocks >= kParallelQuantizeBlocks)
    for (std::int64_t i = 0; i < groups * blocks; ++i) {
        const std::int64_t group = i / blocks, b = i % blocks;
        const std::int64_t t0 = group * kPackedTokens;
        quantize_group(quantize, x + t0 * cols + b * QK_K, cols, std::min<std::int64_t>(kPackedTokens, n_tokens - t0), out[i]);
    }
}

}  // namespace matmul_detail

// One product of a fused call: y = W x, y: [n_tokens, W.rows].
struct MatmulTarget {
    const MatrixView* w;
    float* y;
};

namespace matmul_detail {

// The activations in the one form the plan's kernels read: rows (the tiles and decode kernels)
// or packed blocks (the GEMMs).
struct Activations {
    const std::uint8_t* data;  // [n_tokens, stride bytes], or null when packed
    std::size_t stride;
    const BlockQ8Kx16* packed;  // [ceil(n_tokens / 16), cols / QK_K] when the GEMM kernels read them, else null
};

// Quantizes x once into the activation format `format` (F32: x as it is), into rows, or with
// `pack` (for GEMM kernels, whose format is Q8_K) into blocks of 16 tokens.
inline Activations prepare_activations(const KernelSet& kernels, TensorType format, const float* x,
                                       std::int64_t n_tokens, std::int64_t cols, bool pack, MatmulScratch& scratch,
                                       int team) {
    if (format == TensorType::F32) return {reinterpret_cast<const std::uint8_t*>(x), std::size_t(cols) * sizeof(float), nullptr};
    if (pack) {  // only the Q8_K GEMMs read packed activations, and then nothing else
        if (format != TensorType::Q8_K)
            fail("matmul: GEMM activations are packed from Q8_K, found ", type_name(format));
        const std::size_t groups = std::size_t(packed_groups(n_tokens));
        auto* packed = reinterpret_cast<BlockQ8Kx16*>(scratch.bytes(groups * std::size_t(cols / QK_K) * sizeof(BlockQ8Kx16)));
        quantize_packed(kernels.quantizer(format), x, n_tokens, cols, packed, team);
        return {nullptr, 0, packed};
    }
    const TypeRow& blocks = type_row(format, "matmul activations");
    const std::int64_t per_token = cols / std::int64_t(blocks.block_elements);
    const std::size_t stride = std::size_t(per_token) * blocks.block_bytes;
    std::uint8_t* buffer = scratch.bytes(std::size_t(n_tokens) * stride);
    quantize_activations(kernels.quantizer(format), std::int64_t(blocks.block_elements), blocks.block_bytes, x,
                         n_tokens, cols, buffer, team);
    return {buffer, stride, nullptr};
}

}  // namespace matmul_detail

namespace matmul_detail {

inline constexpr int kMaxTargets = 4;  // fused products in one call

// Tokens per block of a prompt's work items, given the widest GEMM call among the targets, the
// input's columns and a core's L2 in bytes: kTokenBlock rounded up to whole calls, since a call
// of a few tokens unpacks its weights for little work. Every work item reads the block's packed
// activations again, so they should wait in L2 beside the weights streaming through: where a wide
// input (the 3B model's ffn_down, 11008 columns) makes them outgrow three quarters of L2, the
// block is halved once (AVX-512's 96 tokens to 48, still whole passes of its GEMM; AVX2's 64 to
// 32; the ARM GEMMs' two calls of 32 to one), so that each item finds them there rather than in
// L3 (docs/performance.md).
inline std::int64_t token_block_for(std::int64_t widest_call, std::int64_t cols, std::size_t l2_bytes) {
    const std::int64_t block = (kTokenBlock + widest_call - 1) / widest_call * widest_call;
    const std::size_t packed_bytes =
        std::size_t(block / kPackedTokens) * std::size_t((cols + QK_K - 1) / QK_K) * sizeof(BlockQ8Kx16);
    const bool halves_whole = (block / 2) % kPackedTokens == 0;
    return packed_bytes > l2_bytes / 4 * 3 && halves_whole ? block / 2 : block;
}

// This machine's L2 for token_block_for: 1 MiB where the system does not say.
inline std::size_t l2_bytes_here() {
    static const std::size_t bytes = [] {
        const std::size_t said = platform::l2_cache_bytes();
        return said ? said : std::size_t(1) << 20;
    }();
    return bytes;
}

// Planning: the kernels each target is read with, and how its rows are cut into work items (a
// tile's rows or a row group's; in GEMM mode kGemmItemRows), numbered across targets.
struct MatmulPlan {
    TensorType format = TensorType::F32;  // the activation format every target shares
    DotTileFn tiles[kMaxTargets];
    GemmTileFn gemms[kMaxTargets];        // used only when every target has one
    GroupDotFn group_dots[kMaxTargets];   // for targets read as row groups
    GroupGemmFn group_gemms[kMaxTargets];  // their GEMM set's GEMM over the groups as they are, if it has one
    std::size_t group_bytes[kMaxTargets];  // their bytes per row group (looked up once, not per item)
    bool use_gemm = false;
    // Each target's GEMM call shape: its kernel set's, which differs between targets where one
    // type's GEMM comes from a set down the fallback chain (AMX: AVX-512's for Q5_K beside Q6_K).
    GemmShape gemm_shapes[kMaxTargets];
    std::int64_t group_rows[kMaxTargets];  // rows per work item
    std::int64_t group_end[kMaxTargets];   // prefix sums of each target's work items
    std::int64_t total_groups = 0;
    // Rows restored from row groups for the GEMMs: with one token block every item is visited
    // once, so each thread restores into its own slot, still in its caches when the GEMM reads it;
    // with several, every item's rows are restored once, in the first block, into room for whole
    // matrices, and read there by any thread in later blocks (restoring per block made long
    // prompts measurably slower on the 3B shape).
    bool restore_once = false;
    // Tokens per block of the prompt's work items (token_block_for).
    std::int64_t token_block = kTokenBlock;
    std::size_t restored_at[kMaxTargets];  // restore_once: where a target's rows go
    std::size_t restored_bytes = 0;  // restore_once: all such targets' rows; else one slot, the largest item
    // A gated product (matmul_gated): targets 0 and 1 are the gate and up projections of the same
    // rows; each item computes its rows of both and writes only swiglu(gate, up) to target 0's y.
    const SwigluKernels* swiglu = nullptr;
    // A gated product that hands h on to a GEMM (matmul_mlp_add, hand_on): its items are QK_K rows
    // of both targets, and each quantizes its h, as quantize_packed would, into block r0 / QK_K of
    // every token group of packed_h ([token group][W_gate.rows / QK_K]), writing no floats.
    BlockQ8Kx16* packed_h = nullptr;
    FromFloatFn quantize_h = nullptr;
    // The items add their results to y (y += W x, matmul_add) rather than store them. GEMMs only:
    // the other kernels write y themselves.
    bool accumulate = false;
};

// Checks the targets against each other and picks their kernels and work items; `gated`: the
// two targets are a gate and an up projection, to be fused where the plan allows (MatmulPlan::swiglu).
inline MatmulPlan plan_matmul(const KernelSet& kernels, std::span<const MatmulTarget> targets, std::int64_t n_tokens,
                              bool gated = false) {
    if (targets.size() > kMaxTargets) fail("matmul: at most ", kMaxTargets, " fused products, got ", targets.size());
    MatmulPlan plan;
    const MatrixView& first = *targets[0].w;
    plan.format = weight_row(first.type).activations;
    plan.use_gemm = n_tokens > 1;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const MatrixView& w = *targets[i].w;
        check_view(w, n_tokens);
        if (w.cols != first.cols || weight_row(w.type).activations != plan.format)
            fail("matmul: fused products must share their input: ", type_name(w.type), " [", w.rows, " x ", w.cols,
                 "] does not fit with ", type_name(first.type), " [", first.rows, " x ", first.cols, "]");
        plan.tiles[i] = kernels.for_weights(w.type);
        plan.group_dots[i] = w.groups ? kernels.for_row_groups(w.type) : nullptr;
        plan.group_bytes[i] = w.groups ? w.group_bytes() : 0;
        if (w.groups && w.rows % kGroupRows != 0)
            fail("matmul: a matrix read as row groups needs a multiple of ", kGroupRows, " rows, found ", w.rows);
        const KernelSet::Gemm gemm = kernels.gemm_for_weights(w.type, n_tokens);
        plan.gemms[i] = gemm.fn;
        plan.group_gemms[i] = w.groups ? gemm.group_fn : nullptr;
        plan.gemm_shapes[i] = gemm.shape;
        plan.use_gemm = plan.use_gemm && gemm.fn != nullptr;
    }
    if (plan.use_gemm) {
        std::int64_t widest = 0;
        for (std::size_t i = 0; i < targets.size(); ++i) widest = std::max<std::int64_t>(widest, plan.gemm_shapes[i].tokens);
        plan.token_block = token_block_for(widest, first.cols, l2_bytes_here());
        if (plan.token_block > kMaxItemTokens)
            fail("matmul: a GEMM of ", widest, " tokens a call makes token blocks of ", plan.token_block,
                 ", more than the ", kMaxItemTokens, " an item's tile holds");
    }
    plan.restore_once = n_tokens > plan.token_block;
    // Gated, an item covers the same kGemmItemRows rows of both. Only with GEMMs: a decode step,
    // bound by reading the weights, ran slower with each item reading rows of both matrices (two
    // streams) than with the products apart, each matrix one stream (docs/performance.md).
    const bool fused_gate = gated && plan.use_gemm;
    if (fused_gate) plan.swiglu = &swiglu_kernels();
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const MatrixView& w = *targets[i].w;
        plan.group_rows[i] = plan.use_gemm ? kGemmItemRows : w.groups ? kGroupRows : kTileRows;
        plan.restored_at[i] = plan.restored_bytes;
        if (w.groups && plan.use_gemm && plan.group_gemms[i] == nullptr)
            plan.restored_bytes = plan.restore_once
                                      ? plan.restored_bytes + std::size_t(w.rows) * w.row_bytes
                                      : std::max(plan.restored_bytes, std::size_t(plan.group_rows[i]) * w.row_bytes);
        if (!fused_gate || i == 0) plan.total_groups += (w.rows + plan.group_rows[i] - 1) / plan.group_rows[i];
        plan.group_end[i] = plan.total_groups;
    }
    return plan;
}

// Fewest items of QK_K rows per thread for a gated product to hand h on packed (hands_on_packed):
// an item is 16 of the plain product's, so the thread that takes the last one can leave the
// others waiting for longer than the packing saves; 32 a thread bound that wait to about a 64th
// of the product (docs/performance.md has what the packing saves).
inline constexpr std::int64_t kMinHandedOnItemsPerThread = 32;

// Whether the gated product `gated` can hand its h ([n_tokens, rows]) to the GEMMs of `next`
// as packed Q8_K blocks: both products run GEMMs, `next` reads Q8_K, h's rows make whole blocks,
// its token blocks whole token groups, and there are at least min_items_per_thread items of QK_K
// rows for each of `team` threads.
inline bool hands_on_packed(const MatmulPlan& gated, const MatmulPlan& next, std::int64_t rows, std::int64_t n_tokens,
                            int team, std::int64_t min_items_per_thread = kMinHandedOnItemsPerThread) {
    if (gated.swiglu == nullptr || !next.use_gemm || next.format != TensorType::Q8_K || rows % QK_K != 0 ||
        gated.token_block % kPackedTokens != 0)
        return false;
    const std::int64_t token_blocks = (n_tokens + gated.token_block - 1) / gated.token_block;
    return rows / QK_K * token_blocks >= min_items_per_thread * team;
}

// Makes a gated plan hand h ([n_tokens, rows]) on packed (MatmulPlan::packed_h): items of QK_K
// rows, of the gate target only (each computes the same rows of the up projection).
inline void hand_on(MatmulPlan& gated, std::int64_t rows, BlockQ8Kx16* packed_h, FromFloatFn quantize) {
    gated.packed_h = packed_h;
    gated.quantize_h = quantize;
    gated.group_rows[0] = QK_K;
    gated.total_groups = gated.group_end[0] = gated.group_end[1] = rows / QK_K;
}

// Execution: one work item of the plan for a range of tokens, on the kernels it chose.
struct MatmulRun {
    const MatmulPlan& plan;
    std::span<const MatmulTarget> targets;
    Activations acts;
    std::uint8_t* restored;  // room for rows restored from row groups (see MatmulPlan::restore_once)

    // Work item `group` for tokens [t0, t1).
    void item(std::int64_t group, std::int64_t t0, std::int64_t t1) const {
        std::size_t i = 0;
        while (group >= plan.group_end[i]) ++i;
        const MatrixView& w = *targets[i].w;
        const std::int64_t r0 = (group - (i ? plan.group_end[i - 1] : 0)) * plan.group_rows[i];
        const int n_rows = int(std::min<std::int64_t>(plan.group_rows[i], w.rows - r0));
        float* const y = targets[i].y + r0 + t0 * w.rows;  // token t0's results
        if (!plan.use_gemm) return products(i, r0, n_rows, t0, t1, y, std::size_t(w.rows));
        if (plan.packed_h != nullptr) return packed_swiglu(r0, t0, t1);
        // The GEMMs write the item's results into a tile ([token][row], its rows side by side),
        // and each token's run of rows then goes to y at once. y's rows lie w.rows floats apart,
        // 8 KB on the 3B shape's 2048: a GEMM's scattered stores into them (a few floats to each of
        // 48 lines that share one L1 set) halved its speed on Zen 5 (docs/performance.md).
        alignas(64) float tile[kMaxItemTokens * kGemmItemRows];  // [t - t0][r - r0]
        item_tile(i, r0, n_rows, t0, t1, tile);
        for (std::int64_t t = 0; t < t1 - t0; ++t) {
            const float* from = tile + t * n_rows;
            float* to = y + t * w.rows;
            if (plan.accumulate)
                for (int r = 0; r < n_rows; ++r) to[r] += from[r];
            else
                for (int r = 0; r < n_rows; ++r) to[r] = from[r];
        }
    }

    // A GEMM item's results as a tile ([t - t0][r - r0], n_rows <= kGemmItemRows floats a token):
    // target i's products, or in a gated plan swiglu(gate, up) of the same rows of both.
    void item_tile(std::size_t i, std::int64_t r0, int n_rows, std::int64_t t0, std::int64_t t1, float* tile) const {
        products(i, r0, n_rows, t0, t1, tile, std::size_t(n_rows));
        if (plan.swiglu == nullptr) return;
        alignas(64) float up[kMaxItemTokens * kGemmItemRows];  // [t - t0][r - r0]
        products(1, r0, n_rows, t0, t1, up, std::size_t(n_rows));
        plan.swiglu->swiglu(tile, up, tile, (t1 - t0) * n_rows);
    }

    // Rows [r0, r0 + QK_K) of a gated product handing h on (MatmulPlan::packed_h), tokens [t0, t1):
    // item tiles of kGemmItemRows rows gathered in this thread's buffer (96 KB at most, so it
    // waits in L2), then each token group's Q8_K block quantized and packed from there.
    void packed_swiglu(std::int64_t r0, std::int64_t t0, std::int64_t t1) const {
        thread_local AlignedBuffer buffer;
        float* const h = reinterpret_cast<float*>(buffer.at_least(sizeof(float) * kMaxItemTokens * QK_K));  // [t - t0][r - r0]
        for (std::int64_t sub = 0; sub < QK_K; sub += kGemmItemRows) {
            alignas(64) float tile[kMaxItemTokens * kGemmItemRows];  // [t - t0][r - r0 - sub]
            item_tile(0, r0 + sub, int(kGemmItemRows), t0, t1, tile);
            for (std::int64_t t = 0; t < t1 - t0; ++t)
                std::copy_n(tile + t * kGemmItemRows, kGemmItemRows, h + t * QK_K + sub);
        }
        const std::int64_t blocks = targets[0].w->rows / QK_K;
        for (std::int64_t g0 = t0; g0 < t1; g0 += kPackedTokens)  // t0 is a multiple of kPackedTokens
            quantize_group(plan.quantize_h, h + (g0 - t0) * QK_K, QK_K, std::min<std::int64_t>(kPackedTokens, t1 - g0),
                           plan.packed_h[(g0 / kPackedTokens) * blocks + r0 / QK_K]);
    }

    // Target i's rows [r0, r0 + n_rows) against tokens [t0, t1), on the kernels the plan chose:
    // token t's results at out + (t - t0) * stride.
    void products(std::size_t i, std::int64_t r0, int n_rows, std::int64_t t0, std::int64_t t1, float* out,
                  std::size_t stride) const {
        const MatrixView& w = *targets[i].w;
        if (!plan.use_gemm) {
            if (w.groups) return group_dots(i, r0, t0, t1, out, stride);
            return dot_tiles(i, r0, n_rows, t0, t1, out, stride);
        }
        if (w.groups && plan.group_gemms[i]) return group_gemm(i, r0, n_rows, t0, t1, out, stride);
        const std::uint8_t* rows = w.groups ? restore(i, r0, n_rows, t0) : w.data + std::size_t(r0) * w.row_bytes;
        gemm(i, rows, n_rows, t0, t1, out, stride);
    }

    // One row group, kTileCols tokens per call.
    void group_dots(std::size_t i, std::int64_t r0, std::int64_t t0, std::int64_t t1, float* out, std::size_t stride) const {
        const MatrixView& w = *targets[i].w;
        const std::uint8_t* g = w.groups + std::size_t(r0 / kGroupRows) * plan.group_bytes[i];
        for (std::int64_t t = t0; t < t1; t += kTileCols)
            plan.group_dots[i](w.cols, g, acts.data + std::size_t(t) * acts.stride, acts.stride,
                               int(std::min<std::int64_t>(kTileCols, t1 - t)), out + (t - t0) * stride, stride);
    }

    // Dot-product tiles, kTileCols tokens per call.
    void dot_tiles(std::size_t i, std::int64_t r0, int n_rows, std::int64_t t0, std::int64_t t1, float* out,
                   std::size_t stride) const {
        const MatrixView& w = *targets[i].w;
        const std::uint8_t* rows = w.data + std::size_t(r0) * w.row_bytes;
        for (std::int64_t t = t0; t < t1; t += kTileCols)
            plan.tiles[i](w.cols, rows, w.row_bytes, n_rows, acts.data + std::size_t(t) * acts.stride, acts.stride,
                          int(std::min<std::int64_t>(kTileCols, t1 - t)), out + (t - t0) * stride, stride);
    }

    // The item's rows restored from their row groups for a GEMM (once per call with
    // restore_once, else for each token block); where they are.
    const std::uint8_t* restore(std::size_t i, std::int64_t r0, int n_rows, std::int64_t t0) const {
        const MatrixView& w = *targets[i].w;
        std::uint8_t* rows_here = plan.restore_once
                                      ? restored + plan.restored_at[i] + std::size_t(r0) * w.row_bytes
                                      : restored + std::size_t(omp_get_thread_num()) * plan.restored_bytes;
        if (plan.restore_once && t0 != 0) return rows_here;
        const std::size_t group_bytes = plan.group_bytes[i];
        const TypeRow& type = weight_row(w.type);
        const std::int64_t blocks = w.cols / std::int64_t(type.block_elements);
        for (int sub = 0; sub < n_rows; sub += kGroupRows)
            type.row_groups.deinterleave(w.groups + std::size_t((r0 + sub) / kGroupRows) * group_bytes, blocks,
                                         rows_here + std::size_t(sub) * w.row_bytes, w.row_bytes);
        // The next item's groups, asked for now so that they come from DRAM while this
        // item's GEMM runs rather than while its restore waits (it helps short prompts
        // on one thread; long ones are level).
        if (const std::int64_t next_rows = std::min<std::int64_t>(plan.group_rows[i], w.rows - r0 - n_rows); next_rows > 0)
            prefetch_ahead<PrefetchInto::l2>(w.groups + std::size_t((r0 + n_rows) / kGroupRows) * group_bytes,
                                             std::size_t(next_rows / kGroupRows) * group_bytes, 0);
        return rows_here;
    }

    // GEMM calls over row groups as they are, each group's two halves of kTileRows rows.
    void group_gemm(std::size_t i, std::int64_t r0, int n_rows, std::int64_t t0, std::int64_t t1, float* out,
                    std::size_t stride) const {
        const MatrixView& w = *targets[i].w;
        const GemmShape shape = plan.gemm_shapes[i];
        for (std::int64_t t = t0; t < t1; t += shape.tokens) {
            const BlockQ8Kx16* packed = acts.packed + (t / kPackedTokens) * (w.cols / QK_K);
            const int n_cols = int(std::min<std::int64_t>(shape.tokens, t1 - t));
            for (int sub = 0; sub < n_rows; sub += kTileRows)
                plan.group_gemms[i](w.cols, w.groups + std::size_t((r0 + sub) / kGroupRows) * plan.group_bytes[i],
                                    sub % kGroupRows, packed, n_cols, out + (t - t0) * stride + sub, stride);
        }
    }

    // GEMM calls over the packed activations, as group_gemm; t0 is a multiple of kPackedTokens.
    void gemm(std::size_t i, const std::uint8_t* rows, int n_rows, std::int64_t t0, std::int64_t t1, float* out,
              std::size_t stride) const {
        const MatrixView& w = *targets[i].w;
        const GemmShape shape = plan.gemm_shapes[i];
        for (std::int64_t t = t0; t < t1; t += shape.tokens) {
            const BlockQ8Kx16* packed = acts.packed + (t / kPackedTokens) * (w.cols / QK_K);
            const int n_cols = int(std::min<std::int64_t>(shape.tokens, t1 - t));
            for (int sub = 0; sub < n_rows; sub += shape.rows)
                plan.gemms[i](w.cols, rows + std::size_t(sub) * w.row_bytes, w.row_bytes, std::min(shape.rows, n_rows - sub),
                              packed, n_cols, out + (t - t0) * stride + sub, stride);
        }
    }
};

// The plan's products over activations already prepared, on a team of `team` threads.
inline void run_prepared(const MatmulPlan& plan, std::span<const MatmulTarget> targets, const Activations& acts,
                         std::int64_t n_tokens, MatmulScratch& scratch, int team) {
    if (plan.total_groups == 0 || n_tokens == 0) return;
    const std::size_t slots = plan.restore_once ? 1 : std::size_t(team);
    std::uint8_t* restored = plan.restored_bytes ? scratch.restored_rows(plan.restored_bytes * slots) : nullptr;
    const MatmulRun run{plan, targets, acts, restored};
    const std::int64_t total_groups = plan.total_groups;

    // Items are handed out in runs as threads finish, not in fixed shares: cores differ in
    // speed (a hybrid CPU's performance and efficiency cores, a neighbour on a shared host), and
    // with fixed shares the fast thread waits for the slow one at the end of every matmul. Runs
    // stay long enough for the prefetcher; decode's are shorter, since its whole matmul is one
    // token block (figures for both in docs/performance.md). Without a barrier between token
    // blocks a thread starts the next block while the others finish theirs, except after the
    // first block when rows restored there (restore_once) are read by whichever thread takes
    // their item later; where nothing is restored (every target has a group GEMM) no thread waits.
    const std::int64_t runs_per_thread = n_tokens == 1 ? kDecodeRunsPerThread : kPromptRunsPerThread;
    const std::int64_t run_items = std::max<std::int64_t>(1, total_groups / (runs_per_thread * team));
    const bool restored_rows_shared = plan.restore_once && plan.restored_bytes > 0;
#pragma omp parallel num_threads(team)
    {
        for (std::int64_t t0 = 0; t0 < n_tokens; t0 += plan.token_block) {
            const std::int64_t t1 = std::min(n_tokens, t0 + plan.token_block);
#pragma omp for schedule(dynamic, run_items) nowait
            for (std::int64_t g = 0; g < total_groups; ++g) run.item(g, t0, t1);
            if (restored_rows_shared && t0 == 0) {
#pragma omp barrier
            }
        }
    }
}

// The plan's products of x ([n_tokens, cols]) on `threads` threads (thread_team).
inline void run_plan(const KernelSet& kernels, const MatmulPlan& plan, std::span<const MatmulTarget> targets,
                     const float* x, std::int64_t n_tokens, MatmulScratch& scratch, int threads) {
    if (plan.total_groups == 0 || n_tokens == 0) return;
    const int team = thread_team(threads);
    const Activations acts =
        prepare_activations(kernels, plan.format, x, n_tokens, targets[0].w->cols, plan.use_gemm, scratch, team);
    run_prepared(plan, targets, acts, n_tokens, scratch, team);
}

}  // namespace matmul_detail

// y_i = W_i x for every target, with the given kernel set: the targets share one input, so it
// is quantized once and all their rows are split among the threads in one parallel region
// (fewer barriers, better balance than one call per matrix). Every W_i must have the same
// number of columns and the same activation format. x: [n_tokens, cols]. `threads`: the work's
// thread count (thread_team), which every parallel region here runs on.
inline void matmul(const KernelSet& kernels, std::span<const MatmulTarget> targets, const float* x,
                   std::int64_t n_tokens, MatmulScratch& scratch, int threads = 0) {
    if (targets.empty()) return;
    matmul_detail::run_plan(kernels, matmul_detail::plan_matmul(kernels, targets, n_tokens), targets, x, n_tokens,
                            scratch, threads);
}

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t in [0, n_tokens), with the given
// kernel set. x: [n_tokens, cols], y: [n_tokens, rows]; y must not overlap x or W.
inline void matmul(const KernelSet& kernels, const MatrixView& w, const float* x, std::int64_t n_tokens, float* y,
                   MatmulScratch& scratch, int threads = 0) {
    const MatmulTarget target{&w, y};
    matmul(kernels, std::span<const MatmulTarget>(&target, 1), x, n_tokens, scratch, threads);
}

namespace matmul_detail {

// Whether matmul_gated's two products read one quantized input (and so can run as one plan);
// fails where their rows differ, since h pairs them row by row.
inline bool gated_shares_input(const MatrixView& gate, const MatrixView& up) {
    if (gate.rows != up.rows)
        fail("matmul_gated: the gate and up projections must have the same rows, found ", gate.rows, " and ", up.rows);
    return weight_row(gate.type).activations == weight_row(up.type).activations;
}

// matmul_gated after planning: `plan` is plan_matmul over `fused`, {gate -> h, up -> nullptr},
// with the SwiGLU asked for where the input is shared, an empty plan where it is not.
inline void gated_by_plan(const KernelSet& kernels, const MatmulPlan& plan, bool shared_input,
                          const MatmulTarget (&fused)[2], const float* x, std::int64_t n_tokens, MatmulScratch& scratch,
                          int threads) {
    if (plan.swiglu != nullptr) return run_plan(kernels, plan, fused, x, n_tokens, scratch, threads);
    const MatrixView &gate = *fused[0].w, &up = *fused[1].w;
    float* h = fused[0].y;
    // The two products apart: without GEMMs (a decode step, float weights) by the same plan, which
    // is then the plain one of the two; with inputs quantized apart, by two matmuls.
    float* up_product = scratch.separate_product(std::size_t(n_tokens * up.rows));
    if (shared_input) {
        const MatmulTarget apart[] = {{&gate, h}, {&up, up_product}};
        run_plan(kernels, plan, apart, x, n_tokens, scratch, threads);
    } else {
        matmul(kernels, gate, x, n_tokens, h, scratch, threads);
        matmul(kernels, up, x, n_tokens, up_product, scratch, threads);
    }
    swiglu(h, up_product, h, n_tokens * gate.rows, threads);
}

// matmul_add after planning: `plan` is plan_matmul over into_y, {w -> y}.
inline void add_by_plan(const KernelSet& kernels, MatmulPlan plan, const MatmulTarget& into_y, const float* x,
                        std::int64_t n_tokens, MatmulScratch& scratch, int threads) {
    const MatrixView& w = *into_y.w;
    float* y = into_y.y;
    if (plan.use_gemm) {
        plan.accumulate = true;
        return run_plan(kernels, plan, std::span<const MatmulTarget>(&into_y, 1), x, n_tokens, scratch, threads);
    }
    const std::int64_t count = n_tokens * w.rows;
    float* product = scratch.separate_product(std::size_t(count));
    const MatmulTarget apart{&w, product};
    run_plan(kernels, plan, std::span<const MatmulTarget>(&apart, 1), x, n_tokens, scratch, threads);
    for (std::int64_t i = 0; i < count; ++i) y[i] += product[i];
}

}  // namespace matmul_detail

// h = silu(W_gate x) * (W_up x), elementwise, with the given kernel set: the SwiGLU MLP's gated
// hidden state, h: [n_tokens, W_gate.rows]. With GEMMs (prompts, batches) each work item computes
// its rows of both products and writes only h, so neither product is written out and read back;
// otherwise the two products are computed apart and met by swiglu(). Either way the bits are
// those of swiglu() on the two matmuls. x: [n_tokens, cols]; h must not overlap x or the weights.
inline void matmul_gated(const KernelSet& kernels, const MatrixView& gate, const MatrixView& up, const float* x,
                         std::int64_t n_tokens, float* h, MatmulScratch& scratch, int threads = 0) {
    using namespace matmul_detail;
    const bool shared_input = gated_shares_input(gate, up);
    const MatmulTarget fused[] = {{&gate, h}, {&up, nullptr}};
    const MatmulPlan plan = shared_input ? plan_matmul(kernels, fused, n_tokens, true) : MatmulPlan{};
    gated_by_plan(kernels, plan, shared_input, fused, x, n_tokens, scratch, threads);
}

// y += W x, elementwise the same as y[i] += (W x)[i] (a residual add), with the given kernel set.
// With GEMMs (prompts, batches) each work item adds its results to y as it writes them back, so
// the product is never stored and read again; otherwise the product is computed apart and then
// added. x: [n_tokens, cols], y: [n_tokens, rows]; y must not overlap x or W.
inline void matmul_add(const KernelSet& kernels, const MatrixView& w, const float* x, std::int64_t n_tokens, float* y,
                       MatmulScratch& scratch, int threads = 0) {
    using namespace matmul_detail;
    const MatmulTarget into_y{&w, y};
    add_by_plan(kernels, plan_matmul(kernels, std::span<const MatmulTarget>(&into_y, 1), n_tokens), into_y, x, n_tokens,
                scratch, threads);
}

namespace matmul_detail {

// matmul_mlp_add, handing h on packed where hands_on_packed allows it with min_items_per_thread.
inline void mlp_add(const KernelSet& kernels, const MatrixView& gate, const MatrixView& up, const MatrixView& down,
                    const float* x, std::int64_t n_tokens, float* h, float* y, MatmulScratch& scratch, int threads,
                    std::int64_t min_items_per_thread) {
    if (down.cols != gate.rows)
        fail("matmul_mlp_add: the down projection takes ", down.cols, " inputs, the gated hidden state has ", gate.rows);
    const MatmulTarget gated_targets[] = {{&gate, h}, {&up, nullptr}};
    const MatmulTarget into_y{&down, y};
    const int team = thread_team(threads);
    const bool shared_input = gated_shares_input(gate, up);
    MatmulPlan gated = shared_input ? plan_matmul(kernels, gated_targets, n_tokens, true) : MatmulPlan{};
    MatmulPlan next = plan_matmul(kernels, std::span<const MatmulTarget>(&into_y, 1), n_tokens);
    if (!hands_on_packed(gated, next, gate.rows, n_tokens, team, min_items_per_thread)) {
        gated_by_plan(kernels, gated, shared_input, gated_targets, x, n_tokens, scratch, threads);
        add_by_plan(kernels, next, into_y, h, n_tokens, scratch, threads);
        return;
    }
    const std::size_t packed_blocks = std::size_t(packed_groups(n_tokens) * (gate.rows / QK_K));
    auto* packed_h = reinterpret_cast<BlockQ8Kx16*>(scratch.handed_on(packed_blocks * sizeof(BlockQ8Kx16)));
    hand_on(gated, gate.rows, packed_h, kernels.quantizer(TensorType::Q8_K));
    run_plan(kernels, gated, gated_targets, x, n_tokens, scratch, threads);
    next.accumulate = true;
    run_prepared(next, std::span<const MatmulTarget>(&into_y, 1), Activations{nullptr, 0, packed_h}, n_tokens, scratch,
                 team);
}

}  // namespace matmul_detail

// y += W_down h with h = silu(W_gate x) * (W_up x): the SwiGLU MLP added into its residual, with
// the given kernel set; the bits of matmul_gated then matmul_add. Where both products run GEMMs
// over enough work (matmul_detail::hands_on_packed), the gated items quantize h for the down
// projection as they compute it, so it never goes to memory as floats and `h` is not written;
// otherwise h is computed there first. x: [n_tokens, cols], h: room for [n_tokens, W_gate.rows],
// y: [n_tokens, W_down.rows]; neither may overlap x, the other or the weights.
inline void matmul_mlp_add(const KernelSet& kernels, const MatrixView& gate, const MatrixView& up, const MatrixView& down,
                           const float* x, std::int64_t n_tokens, float* h, float* y, MatmulScratch& scratch,
                           int threads = 0) {
    matmul_detail::mlp_add(kernels, gate, up, down, x, n_tokens, h, y, scratch, threads,
                           matmul_detail::kMinHandedOnItemsPerThread);
}

// The same with the process-wide kernel set (kernels() in dispatch.hpp).
inline void matmul(const MatrixView& w, const float* x, std::int64_t n_tokens, float* y, MatmulScratch& scratch,
                   int threads = 0) {
    matmul(kernels(), w, x, n_tokens, y, scratch, threads);
}
inline void matmul(std::span<const MatmulTarget> targets, const float* x, std::int64_t n_tokens, MatmulScratch& scratch,
                   int threads = 0) {
    matmul(kernels(), targets, x, n_tokens, scratch, threads);
}
inline void matmul_gated(const MatrixView& gate, const MatrixView& up, const float* x, std::int64_t n_tokens, float* h,
                         MatmulScratch& scratch, int threads = 0) {
    matmul_gated(kernels(), gate, up, x, n_tokens, h, scratch, threads);
}
inline void matmul_add(const MatrixView& w, const float* x, std::int64_t n_tokens, float* y, MatmulScratch& scratch,
                       int threads = 0) {
    matmul_add(kernels(), w, x, n_tokens, y, scratch, threads);
}
inline void matmul_mlp_add(const MatrixView& gate, const MatrixView& up, const MatrixView& down, const float* x,
                           std::int64_t n_tokens, float* h, float* y, MatmulScratch& scratch, int threads = 0) {
    matmul_mlp_add(kernels(), gate, up, down, x, n_tokens, h, y, scratch, threads);
}

}  // namespace smol
