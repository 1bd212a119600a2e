#pragma once
// y = W x for a batch of tokens, threaded with OpenMP, on whichever kernel set dispatch.hpp
// chose. Quantized weights meet activations quantized once per call (Q8_K for the k-quants,
// Q8_0 for Q8_0); float weights meet the float activations as they are.
//
// Work split: decode (one token) is memory-bound, so each thread takes a contiguous run of
// rows and streams kTileRows of them at once with prefetch. Prompts are compute-bound, so
// tokens are taken kTileCols at a time against each row group (a weight block is reused for
// every token while it sits in L1), in token blocks small enough that the quantized
// activations of a block stay in L2 while the thread walks its rows.

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "smol/core/error.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dispatch.hpp"
#include "smol/quant/reference.hpp"
#include "smol/quant/types.hpp"

namespace smol {

// A weight matrix as stored: `rows` rows of `row_bytes` bytes, each holding `cols` weights.
// rows = output dim, cols = input dim (ggml ne0; blocks run along it).
struct MatrixView {
    TensorType type;
    const std::uint8_t* data;
    std::int64_t rows;
    std::int64_t cols;
    std::size_t row_bytes;
};

// Reusable buffer for quantized activations. Grows only when a call needs more, so a decode
// loop allocates on its first step and never again.
class MatmulScratch {
public:
    MatmulScratch() = default;
    MatmulScratch(const MatmulScratch&) = delete;
    MatmulScratch& operator=(const MatmulScratch&) = delete;
    MatmulScratch(MatmulScratch&&) noexcept = default;
    MatmulScratch& operator=(MatmulScratch&&) noexcept = default;

    // At least `bytes` bytes, 64-byte aligned; contents are not preserved across growth.
    std::uint8_t* bytes(std::size_t bytes) {
        if (bytes > capacity_) {
            const std::size_t grown = std::max(bytes, capacity_ + capacity_ / 2);
            buffer_.reset(static_cast<std::uint8_t*>(::operator new[](grown, std::align_val_t{kAlignment})));
            capacity_ = grown;
        }
        return buffer_.get();
    }
    std::size_t capacity() const { return capacity_; }

private:
    static constexpr std::size_t kAlignment = 64;
    struct AlignedDelete {
        void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
    };
    std::unique_ptr<std::uint8_t[], AlignedDelete> buffer_;
    std::size_t capacity_ = 0;
};

namespace matmul_detail {

inline constexpr std::int64_t kTokenBlock = 64;              // tokens whose activations stay in L2
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

// Quantizes x ([n_tokens, cols]) to one row of Block per token in `out`, in parallel when
// there is enough of it to pay for waking the threads.
template <class Block, int BlockElements>
void quantize_activations(void (*quantize)(const float*, Block*, std::int64_t), const float* x,
                          std::int64_t n_tokens, std::int64_t cols, Block* out) {
    const std::int64_t per_token = cols / BlockElements;
    const std::int64_t total = n_tokens * per_token;
#pragma omp parallel for schedule(static) if (total >= kParallelQuantizeBlocks)
    for (std::int64_t i = 0; i < total; ++i) {
        const std::int64_t t = i / per_token, b = i % per_token;
        quantize(x + t * cols + b * BlockElements, out + i, BlockElements);
    }
}

}  // namespace matmul_detail

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t in [0, n_tokens), with the given
// kernel set. x: [n_tokens, cols], y: [n_tokens, rows]; y must not overlap x or W.
inline void matmul(const KernelSet& kernels, const MatrixView& w, const float* x, std::int64_t n_tokens, float* y,
                   MatmulScratch& scratch) {
    using namespace matmul_detail;
    check_view(w, n_tokens);
    const DotTileFn tile = kernels.for_weights(w.type);
    if (w.rows == 0 || n_tokens == 0) return;

    const std::uint8_t* acts;  // [n_tokens, act_stride bytes]
    std::size_t act_stride;
    switch (w.type) {
        case TensorType::Q4_K:
        case TensorType::Q6_K: {
            act_stride = std::size_t(w.cols / QK_K) * sizeof(BlockQ8K);
            auto* q = reinterpret_cast<BlockQ8K*>(scratch.bytes(std::size_t(n_tokens) * act_stride));
            quantize_activations<BlockQ8K, QK_K>(kernels.quantize_q8k, x, n_tokens, w.cols, q);
            acts = reinterpret_cast<const std::uint8_t*>(q);
            break;
        }
        case TensorType::Q8_0: {
            act_stride = std::size_t(w.cols / QK8_0) * sizeof(BlockQ8_0);
            auto* q = reinterpret_cast<BlockQ8_0*>(scratch.bytes(std::size_t(n_tokens) * act_stride));
            quantize_activations<BlockQ8_0, QK8_0>(quantize_row_q8_0, x, n_tokens, w.cols, q);
            acts = reinterpret_cast<const std::uint8_t*>(q);
            break;
        }
        default:
            act_stride = std::size_t(w.cols) * sizeof(float);
            acts = reinterpret_cast<const std::uint8_t*>(x);
            break;
    }

    const std::int64_t rows = w.rows;
    const std::int64_t row_groups = (rows + kTileRows - 1) / kTileRows;
    const auto run_tile = [&](std::int64_t group, std::int64_t t, std::int64_t n_cols) {
        const std::int64_t r0 = group * kTileRows;
        const int n_rows = int(std::min<std::int64_t>(kTileRows, rows - r0));
        tile(w.cols, w.data + std::size_t(r0) * w.row_bytes, w.row_bytes, n_rows, acts + std::size_t(t) * act_stride,
             act_stride, int(n_cols), y + t * rows + r0, std::size_t(rows));
    };

    if (n_tokens == 1) {
#pragma omp parallel for schedule(static)
        for (std::int64_t g = 0; g < row_groups; ++g) run_tile(g, 0, 1);
        return;
    }
#pragma omp parallel
    {
        // Static and nowait: every token block gives a thread the same rows, so its weights
        // are still in its caches from the previous block.
        for (std::int64_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
            const std::int64_t t1 = std::min(n_tokens, t0 + kTokenBlock);
#pragma omp for schedule(static) nowait
            for (std::int64_t g = 0; g < row_groups; ++g)
                for (std::int64_t t = t0; t < t1; t += kTileCols) run_tile(g, t, std::min<std::int64_t>(kTileCols, t1 - t));
        }
    }
}

// The same with the process-wide kernel set (kernels() in dispatch.hpp).
inline void matmul(const MatrixView& w, const float* x, std::int64_t n_tokens, float* y, MatmulScratch& scratch) {
    matmul(kernels(), w, x, n_tokens, y, scratch);
}

}  // namespace smol
