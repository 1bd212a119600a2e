#pragma once
// SwiGLU gate: h = silu(gate) * up, elementwise. The x86 sets run swiglu_x86.hpp's kernels, the
// ARM sets swiglu_neon.hpp's, which give the scalar loop's bits; SMOL_ISA=scalar runs the loop.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "smol/core/cpu.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/core/threads.hpp"
#include "smol/ops/silu.hpp"
#include "smol/ops/swiglu_neon.hpp"
#include "smol/ops/swiglu_x86.hpp"

namespace smol {

// A set's two kernels, each giving the scalar loop's bits: swiglu, h[i] = silu(gate[i]) * up[i]
// for i < n (h may alias gate or up), and the exp it takes, y[i] = std::exp(x[i]).
struct SwigluKernels {
    Isa isa;
    void (*swiglu)(const float* gate, const float* up, float* h, std::int64_t n);
    void (*exp)(const float* x, float* y, std::int64_t n);
};

inline void swiglu_scalar(const float* gate, const float* up, float* h, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) h[i] = silu(gate[i]) * up[i];
}
inline void exp_scalar(const float* x, float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

// The kernels of `isa`, or nullptr where this build has none.
inline const SwigluKernels* swiglu_kernels_for(Isa isa) {
    static constexpr SwigluKernels scalar{Isa::scalar, swiglu_scalar, exp_scalar};
    switch (isa) {
        case Isa::scalar: return &scalar;
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: {
            static constexpr SwigluKernels set{Isa::avx2, swiglu_x86::avx2::swiglu, swiglu_x86::avx2::exp_values};
            return &set;
        }
#endif
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: {
            static constexpr SwigluKernels set{Isa::avx512, swiglu_x86::avx512::swiglu,
                                               swiglu_x86::avx512::exp_values};
            return &set;
        }
#endif
#if SMOL_HAVE_NEON_KERNELS
        case Isa::neon: {
            static constexpr SwigluKernels set{Isa::neon, swiglu_neon::neon::swiglu, swiglu_neon::neon::exp_values};
            return &set;
        }
#endif
        default: return nullptr;
    }
}

// The kernels of the set this process runs (selected_isa()) or the first down its fallback chain.
inline const SwigluKernels& swiglu_kernels() {
    static const SwigluKernels* chosen = kernels_down_fallback_chain(swiglu_kernels_for);
    return *chosen;
}

// gate, up, h: [n] (h may alias gate). `threads`: the work's thread count (thread_team).
inline void swiglu(const float* gate, const float* up, float* h, std::int64_t n, int threads = 0) {
    constexpr std::int64_t kChunk = 4096;  // values per work item
    const auto kernel = swiglu_kernels().swiglu;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (n > 65536)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t first = c * kChunk;
        kernel(gate + first, up + first, h + first, std::min(kChunk, n - first));
    }
}

}  // namespace smol
