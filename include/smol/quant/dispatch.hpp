#pragma once
// Picks the kernel set once per process: the best one this CPU runs (core/cpu.hpp), or the one
// SMOL_ISA forces. A set is a struct of function pointers so callers pay one indirect call
// per tile, and adding an ISA means one more file and one more case here.

#include "smol/core/cpu.hpp"
#include "smol/core/error.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_avx2.hpp"
#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/kernels_scalar.hpp"
#include "smol/quant/reference.hpp"
#include "smol/quant/types.hpp"

namespace smol {

struct KernelSet {
    Isa isa;
    DotTileFn q4k_q8k;    // Q4_K weights x Q8_K activations
    DotTileFn q6k_q8k;    // Q6_K weights x Q8_K activations
    DotTileFn q8_0_q8_0;  // Q8_0 weights x Q8_0 activations
    DotTileFn f32;        // float weights x float activations
    DotTileFn f16;
    DotTileFn bf16;
    void (*quantize_q8k)(const float* x, BlockQ8K* out, std::int64_t n);  // bit-identical to the reference

    // The tile kernel for a weight type; fails for types smol cannot multiply.
    DotTileFn for_weights(TensorType type) const {
        switch (type) {
            case TensorType::Q4_K: return q4k_q8k;
            case TensorType::Q6_K: return q6k_q8k;
            case TensorType::Q8_0: return q8_0_q8_0;
            case TensorType::F32: return f32;
            case TensorType::F16: return f16;
            case TensorType::BF16: return bf16;
            default: fail("matmul: no kernel for ", type_name(type), " weights (supported: Q4_K, Q6_K, Q8_0, F32, F16, BF16)");
        }
    }
};

struct scalar_tag {};
struct avx2_tag {};
struct avx512_tag {};

inline KernelSet kernel_set(scalar_tag) {
    namespace k = kernels_scalar;
    return {Isa::scalar, k::q4k_q8k, k::q6k_q8k, k::q8_0_q8_0, k::f32, k::f16, k::bf16, quantize_row_q8_k};
}
#if SMOL_HAVE_AVX2_KERNELS
inline KernelSet kernel_set(avx2_tag) {
    namespace k = kernels_avx2;
    return {Isa::avx2, k::q4k_q8k, k::q6k_q8k, k::q8_0_q8_0, k::f32, k::f16, k::bf16, k::quantize_row_q8_k};
}
#endif
#if SMOL_HAVE_AVX512_KERNELS
inline KernelSet kernel_set(avx512_tag) {
    namespace k = kernels_avx512;
#if SMOL_HAVE_AVX2_KERNELS
    constexpr auto quantize = kernels_avx2::quantize_row_q8_k;  // memory-bound: AVX2 suffices
#else
    constexpr auto quantize = quantize_row_q8_k;
#endif
    return {Isa::avx512, k::q4k_q8k, k::q6k_q8k, k::q8_0_q8_0, k::f32, k::f16, k::bf16, quantize};
}
#endif

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
        default: return false;
    }
}

// The kernel set for one ISA, refusing sets that are not compiled in or that this CPU
// cannot execute (calling those would be a SIGILL, not an error message).
inline KernelSet kernels_for(Isa isa) {
    if (!isa_compiled(isa)) fail("kernel set ", isa_name(isa), " is not compiled into this build");
    if (!cpu_features().supports(isa))
        fail("kernel set ", isa_name(isa), " needs CPU features this machine lacks (", describe(), ")");
    switch (isa) {
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: return kernel_set(avx512_tag{});
#endif
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: return kernel_set(avx2_tag{});
#endif
        default: return kernel_set(scalar_tag{});
    }
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
