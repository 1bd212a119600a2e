#pragma once
// One row per weight type smol can multiply: the activations it meets and its tile kernel in
// every kernel set. Adding a weight type, or a kernel set, touches this table and one file of
// kernels; matmul, weight binding and dispatch all read it from here.

#include <string>

#include "smol/core/cpu.hpp"
#include "smol/core/error.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_avx2.hpp"
#include "smol/quant/kernels_amx.hpp"
#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/kernels_scalar.hpp"
#include "smol/quant/kquant_tiles_avx2.hpp"
#include "smol/quant/kquant_tiles_avx512.hpp"

namespace smol {

// What a weight type's rows are multiplied with: activations quantized once per matmul to Q8_K
// (k-quants) or Q8_0 blocks, or the float activations as they are.
enum class ActivationFormat { Q8K, Q8_0, Float };

inline constexpr int kIsaCount = 4;  // Isa::scalar, avx2, avx512, amx

struct WeightFormat {
    TensorType type;
    ActivationFormat activations;
    DotTileFn tiles[kIsaCount];    // [Isa]: nullptr where this build lacks the kernel set
    GemmTileFn gemms[kIsaCount];   // [Isa]: prompt kernels on activations packed 16 tokens to a block
                                   // (Q8_K only); nullptr where the set has none and uses its tiles
};

// How much one GEMM call of a kernel set covers: at most `rows` weight rows and `tokens` tokens
// (a multiple of kPackedTokens). Batches of fewer than `min_tokens` tokens take the GEMM of the
// set below instead (AMX pays for its tiles only from a full group of tokens on).
struct GemmShape {
    int rows;
    int tokens;
    int min_tokens;
};
inline constexpr GemmShape kGemmShapes[kIsaCount] = {
    {kTileRows, kGemmTokens, 1},  // scalar: unused, it has no GEMM
    {kTileRows, kGemmTokens, 1},
    {kTileRows, kGemmTokens, 1},
#if SMOL_HAVE_AMX_KERNELS
    {kernels_amx::kRows, kernels_amx::kTokens, kernels_amx::kMinTokens},
#else
    {kTileRows, kGemmTokens, 1},
#endif
};

#if SMOL_HAVE_AVX2_KERNELS
#define SMOL_AVX2_TILE(name) kernels_avx2::name
#else
#define SMOL_AVX2_TILE(name) nullptr
#endif
#if SMOL_HAVE_AVX512_KERNELS
#define SMOL_AVX512_TILE(name) kernels_avx512::name
#else
#define SMOL_AVX512_TILE(name) nullptr
#endif
#if SMOL_HAVE_AMX_KERNELS
#define SMOL_AMX_GEMM(name) kernels_amx::name
#else
#define SMOL_AMX_GEMM(name) nullptr
#endif
// The AMX set decodes, and multiplies what has no AMX GEMM, with the AVX-512 kernels.
#define SMOL_TILES(name) {kernels_scalar::name, SMOL_AVX2_TILE(name), SMOL_AVX512_TILE(name), SMOL_AVX512_TILE(name)}
#define SMOL_GEMMS(name) {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX512_TILE(name), SMOL_AMX_GEMM(name)}
// Types with AVX2 and AVX-512 GEMMs but no AMX one: the AMX set multiplies their prompts with
// tiles (its GEMM shape is larger than the AVX-512 GEMMs take).
#define SMOL_SET_GEMMS(name) {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX512_TILE(name), nullptr}

inline constexpr WeightFormat kWeightFormats[] = {
    {TensorType::Q2_K, ActivationFormat::Q8K, SMOL_TILES(q2k_q8k), SMOL_SET_GEMMS(q2k_q8k_gemm)},
    {TensorType::Q3_K, ActivationFormat::Q8K, SMOL_TILES(q3k_q8k), SMOL_SET_GEMMS(q3k_q8k_gemm)},
    {TensorType::Q4_K, ActivationFormat::Q8K, SMOL_TILES(q4k_q8k), SMOL_GEMMS(q4k_q8k_gemm)},
    {TensorType::Q5_K, ActivationFormat::Q8K, SMOL_TILES(q5k_q8k), SMOL_SET_GEMMS(q5k_q8k_gemm)},
    {TensorType::Q6_K, ActivationFormat::Q8K, SMOL_TILES(q6k_q8k), SMOL_GEMMS(q6k_q8k_gemm)},
    {TensorType::Q8_0, ActivationFormat::Q8_0, SMOL_TILES(q8_0_q8_0), {}},
    {TensorType::F32, ActivationFormat::Float, SMOL_TILES(f32), {}},
    {TensorType::F16, ActivationFormat::Float, SMOL_TILES(f16), {}},
    {TensorType::BF16, ActivationFormat::Float, SMOL_TILES(bf16), {}},
};

#undef SMOL_SET_GEMMS
#undef SMOL_GEMMS
#undef SMOL_TILES
#undef SMOL_AMX_GEMM
#undef SMOL_AVX512_TILE
#undef SMOL_AVX2_TILE

// The row for a weight type, or nullptr where smol has no kernels for it.
inline const WeightFormat* find_weight_format(TensorType type) {
    for (const WeightFormat& format : kWeightFormats)
        if (format.type == type) return &format;
    return nullptr;
}

// "Q4_K, Q6_K, ...": the types the table holds, for error messages.
inline std::string supported_weight_types() {
    std::string names;
    for (const WeightFormat& format : kWeightFormats) {
        if (!names.empty()) names += ", ";
        names += type_name(format.type);
    }
    return names;
}

// The row for a weight type; fails for types smol cannot multiply.
inline const WeightFormat& weight_format(TensorType type) {
    const WeightFormat* format = find_weight_format(type);
    if (format == nullptr)
        fail("matmul: no kernel for ", type_name(type), " weights (supported: ", supported_weight_types(), ")");
    return *format;
}

}  // namespace smol
