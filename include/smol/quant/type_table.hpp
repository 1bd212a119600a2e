#pragma once
// One row per tensor type smol computes with, and everything smol knows about it: block geometry
// (checked against the block struct), its reference to-float and from-float conversions (plus
// faster from-float versions where a kernel set has one), the activations its rows meet, its
// tile kernel and prompt GEMM in every kernel set, and the row-group layout decode may read it
// in. Weight binding, matmul, the KV cache, dispatch and the tools all read a type's facts from
// here: adding a type adds a row here and its kernels.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "smol/core/cpu.hpp"
#include "smol/core/error.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_amx.hpp"
#include "smol/quant/kernels_avx2.hpp"
#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/kernels_avx_vnni.hpp"
#include "smol/quant/kernels_i8mm.hpp"
#include "smol/quant/kernels_neon.hpp"
#include "smol/quant/float_tiles_xsimd.hpp"
#include "smol/quant/kernels_scalar.hpp"
#include "smol/quant/kquant_tiles_avx2.hpp"
#include "smol/quant/kquant_tiles_avx512.hpp"
#include "smol/quant/kquant_tiles_avx_vnni.hpp"
#include "smol/quant/kquant_gemm_dotprod.hpp"
#include "smol/quant/kquant_tiles_neon.hpp"
#include "smol/quant/legacy_tiles_avx2.hpp"
#include "smol/quant/legacy_tiles_avx512.hpp"
#include "smol/quant/legacy_tiles_avx_vnni.hpp"
#include "smol/quant/legacy_tiles_neon.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/quant/reference.hpp"
#include "smol/quant/row_group_tiles.hpp"
#include "smol/quant/row_groups.hpp"

namespace smol {

using ToFloatFn = void (*)(const void* blocks, float* out, std::int64_t n);      // out: [n]
using FromFloatFn = void (*)(const float* x, void* blocks, std::int64_t n);      // x: [n]

// A type's row-group layout (row_groups.hpp): the bytes of one block of kGroupRows rows, the two
// exact conversions, and the decode kernel in every kernel set. block_bytes == 0: decode reads
// the type's rows as stored.
struct RowGroupLayout {
    std::size_t block_bytes = 0;
    InterleaveFn interleave = nullptr;
    DeinterleaveFn deinterleave = nullptr;
    std::array<GroupDotFn, kIsaCount> dots{};  // [Isa]: nullptr where the build lacks the set
    // [Isa]: prompt GEMMs reading the groups as they are, for the sets whose GEMM (gemms in the
    // type's row) has a group form; nullptr elsewhere: prompts then restore the rows first.
    std::array<GroupGemmFn, kIsaCount> gemms{};

    bool exists() const { return block_bytes != 0; }
};

struct TypeRow {
    TensorType type;
    std::size_t block_elements;  // values per block (1 for the float formats)
    std::size_t block_bytes;     // sizeof the block struct, equal to ggml's (checked when the row is made)
    ToFloatFn to_float;          // the reference dequantizer, exactly ggml's values
    // [Isa] float rows to blocks, each column byte-identical to column 0 (the reference); all
    // nullptr where smol never writes the type.
    std::array<FromFloatFn, kIsaCount> from_float;
    // What the rows are multiplied with: Q8_K or Q8_0 blocks quantized once per matmul, or F32
    // (the activations as they are). Activation formats name themselves.
    TensorType activations;
    std::array<DotTileFn, kIsaCount> tiles;   // [Isa]: nullptr where the type is not a weight or the build lacks the set
    std::array<GemmTileFn, kIsaCount> gemms;  // [Isa]: prompt kernels over activations packed 16 tokens to a
                                              // block (Q8_K only); nullptr where the set multiplies prompts with tiles
    RowGroupLayout row_groups;                // how model loading may regroup the type's rows for decode

    bool is_weight() const { return tiles[0] != nullptr; }  // every weight type has a scalar tile
};

// How much one GEMM call of a kernel set covers: at most `rows` weight rows and `tokens` tokens
// (a multiple of kPackedTokens). Batches of fewer than `min_tokens` tokens take the GEMM of the
// set below instead, or the tiles where no set below has one (AMX pays for its tiles only from a
// full group of tokens on).
struct GemmShape {
    int rows;
    int tokens;
    int min_tokens;
};
// The AVX2 and AVX-512 GEMMs cost about as much for 2 tokens as for 16 (a packed block holds 16,
// and each weight block is unpacked for all of them), so a few tokens (a speculative verify
// step, a short prompt tail) go through the tiles or row-group kernels, which read each weight
// once per 4 tokens. Measured on the 3B model, the tiles win clearly at 2 and 4 tokens, are
// about level at 8, and lose at 16; with the weights in row groups a step of 8 costs less through
// the group kernels than through the GEMMs, so 8 stays with them (figures: docs/performance.md).
// All give the same bits (test_matmul), so the switch changes no logit.
inline constexpr int kMinGemmTokens = 9;
inline constexpr GemmShape kGemmShapes[kIsaCount] = {
    {kTileRows, kGemmTokens, 1},  // scalar: unused, it has no GEMM
    {kTileRows, kGemmTokensAvx2, kMinGemmTokens},
    {kTileRows, kGemmTokensAvx2, kMinGemmTokens},  // avx_vnni: the AVX2 GEMM driver
    {kTileRows, kGemmTokensAvx512, kMinGemmTokens},
#if SMOL_HAVE_AMX_KERNELS
    {kernels_amx::kRows, kernels_amx::kTokens, kernels_amx::kMinTokens},
#else
    {kTileRows, kGemmTokens, 1},
#endif
    {kTileRows, kGemmTokens, 1},  // neon: unused, it has no GEMM
    // dotprod: its Q4_K, Q6_K and IQ4_XS GEMMs (kquant_gemm_dotprod.hpp, which i8mm runs too) compute
    // whole groups of 16 tokens; smaller batches go through the tiles from the same count as on
    // x86 (not measured on ARM hardware).
    {kTileRows, kGemmTokens, kMinGemmTokens},
    {kTileRows, kGemmTokens, kMinGemmTokens},
};

namespace type_table_detail {

template <class Block, void (*F)(const Block*, float*, std::int64_t)>
void to_float(const void* blocks, float* out, std::int64_t n) {
    F(static_cast<const Block*>(blocks), out, n);
}
template <class Block, void (*F)(const float*, Block*, std::int64_t)>
void from_float(const float* x, void* blocks, std::int64_t n) {
    F(x, static_cast<Block*>(blocks), n);
}

// A row's identity: geometry from core/tensor_types.hpp, checked against the block struct, the
// reference conversion to floats, and `from_floats` (nullptr where smol never writes the type).
template <TensorType T, class Block, void (*ToFloat)(const Block*, float*, std::int64_t)>
constexpr TypeRow row_of(std::array<FromFloatFn, kIsaCount> from_floats, TensorType activations,
                         std::array<DotTileFn, kIsaCount> tiles, std::array<GemmTileFn, kIsaCount> gemms,
                         RowGroupLayout row_groups) {
    static_assert(sizeof(Block) == traits_of(T).block_bytes, "block struct size differs from ggml's block size");
    return TypeRow{T,
                   traits_of(T).block_elements,
                   sizeof(Block),
                   to_float<Block, ToFloat>,
                   from_floats,
                   activations,
                   tiles,
                   gemms,
                   row_groups};
}

// A type smol reads and writes: the reference quantizer in every column.
template <TensorType T, class Block, void (*ToFloat)(const Block*, float*, std::int64_t),
          void (*FromFloat)(const float*, Block*, std::int64_t)>
constexpr TypeRow row(TensorType activations, std::array<DotTileFn, kIsaCount> tiles = {},
                      std::array<GemmTileFn, kIsaCount> gemms = {}, RowGroupLayout row_groups = {}) {
    std::array<FromFloatFn, kIsaCount> from_floats{};
    for (FromFloatFn& f : from_floats) f = from_float<Block, FromFloat>;
    return row_of<T, Block, ToFloat>(from_floats, activations, tiles, gemms, row_groups);
}

// A type smol reads but never writes (it has no quantizer): from_float is nullptr in every
// column. A function of its own rather than a null FromFloat, since GCC's sanitizers make a
// function's address compared with nullptr not a constant expression.
template <TensorType T, class Block, void (*ToFloat)(const Block*, float*, std::int64_t)>
constexpr TypeRow read_only_row(TensorType activations, std::array<DotTileFn, kIsaCount> tiles = {},
                                std::array<GemmTileFn, kIsaCount> gemms = {}, RowGroupLayout row_groups = {}) {
    return row_of<T, Block, ToFloat>({}, activations, tiles, gemms, row_groups);
}

// The same row with the AVX2 set's own from-float in its column and those of every set that runs
// AVX2 code (the x86 sets from avx2 to amx, core/cpu.hpp).
constexpr TypeRow with_avx2_from_float(TypeRow r, FromFloatFn fast) {
    for (int isa = int(Isa::avx2); isa <= int(Isa::amx); ++isa) r.from_float[std::size_t(isa)] = fast;
    return r;
}

// The same row with the ARM sets' own from-float (plain Armv8.0 code, which every ARM set runs) in
// their columns; unchanged where the build has no ARM sets (fast is nullptr).
constexpr TypeRow with_neon_from_float(TypeRow r, FromFloatFn fast) {
    if (fast == nullptr) return r;
    for (int isa = int(Isa::neon); isa <= int(Isa::i8mm); ++isa) r.from_float[std::size_t(isa)] = fast;
    return r;
}

}  // namespace type_table_detail

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
#if SMOL_HAVE_AVX_VNNI_KERNELS
#define SMOL_AVX_VNNI_TILE(name) kernels_avx_vnni::name
#else
#define SMOL_AVX_VNNI_TILE(name) nullptr
#endif
#if SMOL_HAVE_AMX_KERNELS
#define SMOL_AMX_GEMM(name) kernels_amx::name
#else
#define SMOL_AMX_GEMM(name) nullptr
#endif
#if SMOL_HAVE_NEON_KERNELS
#define SMOL_NEON_TILE(name) kernels_neon::name
#else
#define SMOL_NEON_TILE(name) nullptr
#endif
#if SMOL_HAVE_NEON_KERNELS
#define SMOL_NEON_FROM_FLOAT(Block, name) type_table_detail::from_float<Block, kernels_neon::name>
#define SMOL_XSIMD_TILE(name) kernels_xsimd::name
#else
#define SMOL_NEON_FROM_FLOAT(Block, name) nullptr
#define SMOL_XSIMD_TILE(name) nullptr
#endif
#if SMOL_HAVE_DOTPROD_KERNELS
#define SMOL_DOTPROD_TILE(name) kernels_neon::name##_dotprod
#else
#define SMOL_DOTPROD_TILE(name) nullptr
#endif
#if SMOL_HAVE_I8MM_KERNELS
#define SMOL_I8MM_TILE(name) kernels_i8mm::name##_i8mm
#else
#define SMOL_I8MM_TILE(name) nullptr
#endif
// Columns: scalar, avx2, avx_vnni, avx512, amx, then the ARM sets neon, dotprod, i8mm. The ARM
// columns are empty (nullptr, so KernelSet::for_weights takes the kernel of the first set down the
// set's fallback chain that has one, the scalar set's at the end) except for the types with ARM
// kernels of their own (SMOL_ARM_TILES and SMOL_VNNI_TILES: every integer type; SMOL_FLOAT_TILES:
// the float types, through xsimd).
// The AVX-VNNI set runs the AVX2 tiles where the products are not integer bytes (the float types)
// or a k-quant's (decoded by row groups or the AVX2 column kernels: memory-bound), its own for the
// block-of-32 types (SMOL_VNNI_TILES); the AMX set decodes, and multiplies what has no AMX GEMM,
// with the AVX-512 kernels.
#define SMOL_ARM_TILES(name)                                                                      \
    {kernels_scalar::name,   SMOL_AVX2_TILE(name), SMOL_AVX2_TILE(name),    SMOL_AVX512_TILE(name), \
     SMOL_AVX512_TILE(name), SMOL_NEON_TILE(name), SMOL_DOTPROD_TILE(name), nullptr}
#define SMOL_VNNI_TILES(name)                                                                          \
    {kernels_scalar::name,   SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), \
     SMOL_AVX512_TILE(name), SMOL_NEON_TILE(name), SMOL_DOTPROD_TILE(name),   nullptr}
// Q4_K and Q6_K also have i8mm tiles (kernels_i8mm.hpp).
#define SMOL_I8MM_ARM_TILES(name)                                                                 \
    {kernels_scalar::name,   SMOL_AVX2_TILE(name), SMOL_AVX2_TILE(name),    SMOL_AVX512_TILE(name), \
     SMOL_AVX512_TILE(name), SMOL_NEON_TILE(name), SMOL_DOTPROD_TILE(name), SMOL_I8MM_TILE(name)}
// The float types: one NEON tile (float_tiles_xsimd.hpp) that dotprod and i8mm fall back to.
#define SMOL_FLOAT_TILES(name)                                                                    \
    {kernels_scalar::name,   SMOL_AVX2_TILE(name), SMOL_AVX2_TILE(name), SMOL_AVX512_TILE(name), \
     SMOL_AVX512_TILE(name), SMOL_XSIMD_TILE(name), nullptr,            nullptr}
// Q4_K's and Q6_K's: every x86 set's and the dotprod set's (kquant_gemm_dotprod.hpp), which the
// i8mm set runs too.
#define SMOL_GEMMS_AND_DOTPROD(name)                                                                              \
    {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), SMOL_AMX_GEMM(name), nullptr, \
     SMOL_DOTPROD_TILE(name), nullptr}
// Types with AVX2, AVX-VNNI and AVX-512 GEMMs but no AMX one (Q2_K, Q3_K, Q5_K): the AMX set
// multiplies their prompts with AVX-512's (its GEMM shape is larger than the AVX-512 GEMMs take).
#define SMOL_SET_GEMMS(name) {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), nullptr}
// IQ4_XS: those x86 GEMMs (AMX runs AVX-512's) and the dotprod set's (kquant_gemm_dotprod.hpp),
// which the i8mm set runs too.
#define SMOL_SET_GEMMS_AND_DOTPROD(name)                                                                       \
    {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), nullptr, nullptr, \
     SMOL_DOTPROD_TILE(name), nullptr}

// The row-group decode kernels: each x86 set's own (the AMX set decodes with AVX-512's).
#define SMOL_GROUP_DOTS(name)                                                                               \
    {row_group_detail::name, SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), \
     SMOL_AVX512_TILE(name)}
// The row-group GEMMs: the AVX2, AVX-VNNI and AVX-512 sets' (AMX's own GEMM reads restored rows).
#define SMOL_GROUP_GEMMS(name) {nullptr, SMOL_AVX2_TILE(name), SMOL_AVX_VNNI_TILE(name), SMOL_AVX512_TILE(name), nullptr}
inline constexpr RowGroupLayout kQ4KRowGroups{sizeof(BlockQ4Kx8), row_group_detail::interleave_q4k,
                                              row_group_detail::deinterleave_q4k, SMOL_GROUP_DOTS(q4k_x8_q8k),
                                              SMOL_GROUP_GEMMS(q4k_x8_q8k_gemm)};
inline constexpr RowGroupLayout kQ6KRowGroups{sizeof(BlockQ6Kx8), row_group_detail::interleave_q6k,
                                              row_group_detail::deinterleave_q6k, SMOL_GROUP_DOTS(q6k_x8_q8k),
                                              SMOL_GROUP_GEMMS(q6k_x8_q8k_gemm)};
#undef SMOL_GROUP_DOTS
#undef SMOL_GROUP_GEMMS

inline constexpr TypeRow kTypeTable[] = {
    // Weights, in the order error messages list them.
    type_table_detail::row<TensorType::Q2_K, BlockQ2K, dequantize_row_q2_k, quantize_row_q2_k>(
        TensorType::Q8_K, SMOL_ARM_TILES(q2k_q8k), SMOL_SET_GEMMS(q2k_q8k_gemm)),
    type_table_detail::row<TensorType::Q3_K, BlockQ3K, dequantize_row_q3_k, quantize_row_q3_k>(
        TensorType::Q8_K, SMOL_ARM_TILES(q3k_q8k), SMOL_SET_GEMMS(q3k_q8k_gemm)),
    type_table_detail::row<TensorType::Q4_K, BlockQ4K, dequantize_row_q4_k, quantize_row_q4_k>(
        TensorType::Q8_K, SMOL_I8MM_ARM_TILES(q4k_q8k), SMOL_GEMMS_AND_DOTPROD(q4k_q8k_gemm), kQ4KRowGroups),
    type_table_detail::row<TensorType::Q5_K, BlockQ5K, dequantize_row_q5_k, quantize_row_q5_k>(
        TensorType::Q8_K, SMOL_ARM_TILES(q5k_q8k), SMOL_SET_GEMMS(q5k_q8k_gemm)),
    type_table_detail::row<TensorType::Q6_K, BlockQ6K, dequantize_row_q6_k, quantize_row_q6_k>(
        TensorType::Q8_K, SMOL_I8MM_ARM_TILES(q6k_q8k), SMOL_GEMMS_AND_DOTPROD(q6k_q8k_gemm), kQ6KRowGroups),
    type_table_detail::with_neon_from_float(
        type_table_detail::row<TensorType::Q8_0, BlockQ8_0, dequantize_row_q8_0, quantize_row_q8_0>(
            TensorType::Q8_0, SMOL_VNNI_TILES(q8_0_q8_0)),
        SMOL_NEON_FROM_FLOAT(BlockQ8_0, quantize_row_q8_0)),
    type_table_detail::row<TensorType::Q4_0, BlockQ4_0, dequantize_row_q4_0, quantize_row_q4_0>(
        TensorType::Q8_0, SMOL_VNNI_TILES(q4_0_q8_0)),
    type_table_detail::row<TensorType::Q5_0, BlockQ5_0, dequantize_row_q5_0, quantize_row_q5_0>(
        TensorType::Q8_0, SMOL_VNNI_TILES(q5_0_q8_0)),
    type_table_detail::row<TensorType::Q4_1, BlockQ4_1, dequantize_row_q4_1, quantize_row_q4_1>(
        TensorType::Q8_0, SMOL_VNNI_TILES(q4_1_q8_0)),
    type_table_detail::row<TensorType::Q5_1, BlockQ5_1, dequantize_row_q5_1, quantize_row_q5_1>(
        TensorType::Q8_0, SMOL_VNNI_TILES(q5_1_q8_0)),
    // The non-linear 4-bit types: smol has no quantizer for them (llama.cpp's searches scales per
    // block), it runs the files people make with llama-quantize.
    type_table_detail::read_only_row<TensorType::IQ4_NL, BlockIQ4NL, dequantize_row_iq4_nl>(
        TensorType::Q8_0, SMOL_VNNI_TILES(iq4_nl_q8_0)),
    type_table_detail::read_only_row<TensorType::IQ4_XS, BlockIQ4XS, dequantize_row_iq4_xs>(
        TensorType::Q8_K, SMOL_ARM_TILES(iq4xs_q8k), SMOL_SET_GEMMS_AND_DOTPROD(iq4xs_q8k_gemm)),
    type_table_detail::row<TensorType::F32, float, dequantize_row_f32, quantize_row_f32>(TensorType::F32,
                                                                                          SMOL_FLOAT_TILES(f32)),
    type_table_detail::row<TensorType::F16, std::uint16_t, dequantize_row_f16, quantize_row_f16>(TensorType::F32,
                                                                                                  SMOL_FLOAT_TILES(f16)),
    type_table_detail::row<TensorType::BF16, std::uint16_t, dequantize_row_bf16, quantize_row_bf16>(
        TensorType::F32, SMOL_FLOAT_TILES(bf16)),
    // Activations only: what the k-quants' rows meet. The AVX2 quantizer serves every set that runs
    // AVX2 code (an AVX-512 one would save too little of a prompt for a second copy;
    // docs/performance.md), and the neon one every ARM set.
#if SMOL_HAVE_AVX2_KERNELS
    type_table_detail::with_avx2_from_float(
        type_table_detail::row<TensorType::Q8_K, BlockQ8K, dequantize_row_q8_k, quantize_row_q8_k>(TensorType::Q8_K),
        type_table_detail::from_float<BlockQ8K, kernels_avx2::quantize_row_q8_k>),
#else
    type_table_detail::with_neon_from_float(
        type_table_detail::row<TensorType::Q8_K, BlockQ8K, dequantize_row_q8_k, quantize_row_q8_k>(TensorType::Q8_K),
        SMOL_NEON_FROM_FLOAT(BlockQ8K, quantize_row_q8_k)),
#endif
};

#undef SMOL_SET_GEMMS
#undef SMOL_GEMMS_AND_DOTPROD
#undef SMOL_DOTPROD_GEMM
#undef SMOL_VNNI_TILES
#undef SMOL_FLOAT_TILES
#undef SMOL_ARM_TILES
#undef SMOL_I8MM_ARM_TILES
#undef SMOL_I8MM_TILE
#undef SMOL_DOTPROD_TILE
#undef SMOL_NEON_FROM_FLOAT
#undef SMOL_XSIMD_TILE
#undef SMOL_NEON_TILE
#undef SMOL_AMX_GEMM
#undef SMOL_AVX_VNNI_TILE
#undef SMOL_AVX512_TILE
#undef SMOL_AVX2_TILE

// The row for a type, or nullptr where smol has none.
constexpr const TypeRow* find_type_row(TensorType type) {
    for (const TypeRow& r : kTypeTable)
        if (r.type == type) return &r;
    return nullptr;
}

// The row for a type; fails naming the type and where (`what`) it was needed.
inline const TypeRow& type_row(TensorType type, const char* what) {
    const TypeRow* r = find_type_row(type);
    if (r == nullptr) fail(what, ": smol has no row for tensor type ", type_name(type), " in its type table");
    return *r;
}

// Whether smol can multiply weights of this type (some GGUF types it only reads through).
inline bool is_weight_type(TensorType type) {
    const TypeRow* r = find_type_row(type);
    return r != nullptr && r->is_weight();
}

// "Q4_K, Q6_K, ...": the weight types the table holds (writable: only those smol can also
// quantize to), for error messages.
inline std::string supported_weight_types(bool writable = false) {
    std::string names;
    for (const TypeRow& r : kTypeTable) {
        if (!r.is_weight() || (writable && r.from_float[0] == nullptr)) continue;
        if (!names.empty()) names += ", ";
        names += type_name(r.type);
    }
    return names;
}

// The row of a weight type; fails for types smol cannot multiply.
inline const TypeRow& weight_row(TensorType type) {
    const TypeRow* r = find_type_row(type);
    if (r == nullptr || !r->is_weight())
        fail("matmul: no kernel for ", type_name(type), " weights (supported: ", supported_weight_types(), ")");
    return *r;
}

// Dequantizes the first n values of one row with the reference; n must be a whole number of blocks.
inline void dequantize_row(TensorType type, const void* row, float* out, std::int64_t n) {
    const std::size_t block = traits_of(type).block_elements;
    if (n < 0 || n % std::int64_t(block) != 0)
        fail("dequantize_row: ", type_name(type), " row length must be a multiple of ", block, ", got ", n);
    type_row(type, "dequantize_row").to_float(row, out, n);
}

// Quantizes one row of n floats into `type` blocks with the reference quantizer.
inline void quantize_row(TensorType type, const float* x, void* out, std::int64_t n) {
    const TypeRow& r = type_row(type, "quantize_row");
    if (r.from_float[0] == nullptr)
        fail("quantize_row: smol cannot write ", type_name(type), " (it writes ", supported_weight_types(true), ")");
    const std::size_t block = r.block_elements;
    if (n < 0 || n % std::int64_t(block) != 0)
        fail("quantize_row: ", type_name(type), " row length must be a multiple of ", block, ", got ", n);
    r.from_float[0](x, out, n);
}

}  // namespace smol
