#pragma once
// Picks the kernel set once per process: the best one this CPU runs (core/cpu.hpp), or the one
// SMOL_ISA forces. A set names its ISA, whose column of the weight-format table
// (weight_formats.hpp) holds its tile kernels; callers pay one indirect call per tile.

#include "smol/core/cpu.hpp"
#include "smol/core/error.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"
#include "smol/quant/weight_formats.hpp"

namespace smol {

struct KernelSet {
    Isa isa;
    void (*quantize_q8k)(const float* x, BlockQ8K* out, std::int64_t n);  // bit-identical to the reference

    // This set's tile kernel for a weight type (weight_formats.hpp); fails for types smol cannot
    // multiply.
    DotTileFn for_weights(TensorType type) const {
        const DotTileFn tile = weight_format(type).tiles[int(isa)];
        if (tile == nullptr) fail("kernel set ", isa_name(isa), " has no ", type_name(type), " kernel in this build");
        return tile;
    }
    // This set's prompt GEMM for a weight type and a batch of n_tokens, with the shape of one
    // call; fn is nullptr where the set multiplies prompts with tiles. A batch too small for
    // the set's GEMM gets the one of the set below (AMX's goes to AVX-512's).
    struct Gemm {
        GemmTileFn fn;
        GemmShape shape;
    };
    Gemm gemm_for_weights(TensorType type, std::int64_t n_tokens) const {
        int set = int(isa);
        while (set > 0 && n_tokens < kGemmShapes[set].min_tokens) --set;
        return {weight_format(type).gemms[set], kGemmShapes[set]};
    }
};

inline KernelSet kernel_set(Isa isa) {
    switch (isa) {
#if SMOL_HAVE_AVX2_KERNELS
        // The quantizer is memory-bound: AVX2 suffices for the AVX-512 set too.
        case Isa::amx:
        case Isa::avx512:
        case Isa::avx2: return {isa, kernels_avx2::quantize_row_q8_k};
#endif
        default: return {isa, quantize_row_q8_k};
    }
}

// Whether this build contains the kernel set at all (independent of the CPU).
inline bool isa_compiled(Isa isa) {
    switch (isa) {
        case Isa::scalar: return true;
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: return true;
#endif
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: return true;
#endif
#if SMOL_HAVE_AMX_KERNELS
        case Isa::amx: return true;
#endif
        default: return false;
    }
}

// The kernel set for one ISA, refusing sets that are not compiled in or that this CPU
// cannot execute (calling those would be a SIGILL, not an error message).
inline KernelSet kernels_for(Isa isa) {
    if (!isa_compiled(isa)) fail("kernel set ", isa_name(isa), " is not compiled into this build");
    if (!cpu_features().supports(isa))
        fail("kernel set ", isa_name(isa), " needs CPU features this machine lacks (", describe(), ")");
    return kernel_set(isa);
}

// The best compiled set the CPU runs, or SMOL_ISA's choice; chosen on first use.
inline const KernelSet& kernels() {
    static const KernelSet selected = [] {
        Isa isa = selected_isa();
        while (!isa_compiled(isa)) isa = Isa(int(isa) - 1);
        return kernels_for(isa);
    }();
    return selected;
}

}  // namespace smol
