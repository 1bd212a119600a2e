#pragma once
// Picks the kernel set once per process: the best one this CPU runs (core/cpu.hpp), or the one
// SMOL_ISA forces. A set names its ISA, whose column of the type table (type_table.hpp) holds
// its kernels; callers pay one indirect call per tile.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "smol/core/cpu.hpp"
#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/packing.hpp"
#include "smol/quant/type_table.hpp"

namespace smol {

struct KernelSet {
    Isa isa;

    // This set's quantizer into an activation format (bit-identical to the reference).
    FromFloatFn quantizer(TensorType activations) const {
        return type_row(activations, "kernel set").from_float[std::size_t(isa)];
    }
    // This set's tile kernel for a weight type, or where it has none that of the first set down its
    // fallback chain that has one (the ARM sets have kernels for some types only; every x86 set
    // has all of them); fails for types smol cannot multiply.
    DotTileFn for_weights(TensorType type) const {
        const TypeRow& row = weight_row(type);
        const DotTileFn tile = row.tiles[std::size_t(first_with(row.tiles))];
        if (tile == nullptr) fail("kernel set ", isa_name(isa), " has no ", type_name(type), " kernel in this build");
        return tile;
    }
    // This set's decode kernel over a type's row groups (row_groups.hpp), falling back as
    // for_weights does; fails for types without them.
    GroupDotFn for_row_groups(TensorType type) const {
        const auto& dots = weight_row(type).row_groups.dots;
        const GroupDotFn dot = dots[std::size_t(first_with(dots))];
        if (dot == nullptr) fail("kernel set ", isa_name(isa), " has no ", type_name(type), " row-group kernel in this build");
        return dot;
    }
    // Whether this set has a decode kernel of its own for a type's row groups. Every x86 set has
    // one for every type with a layout; the ARM sets have none yet, and the scalar group kernel
    // their fallback would run is slower than their own column kernels over the rows as stored.
    bool has_own_row_group_kernel(TensorType type) const {
        return weight_row(type).row_groups.dots[std::size_t(isa)] != nullptr;
    }
    // This set, or the first down its fallback chain whose entry in `column` ([Isa]) is set.
    template <class Fn>
    Isa first_with(const std::array<Fn, kIsaCount>& column) const {
        Isa set = isa;
        while (set != Isa::scalar && column[std::size_t(set)] == nullptr) set = fallback_isa(set);
        return set;
    }
    // This set's prompt GEMM for a weight type and a batch of n_tokens, with the shape of one
    // call; fn is nullptr where neither this set nor those it falls back on (fallback_isa) has a
    // GEMM for the type (prompts then run through the tiles). A batch too small for the set's
    // GEMM, or a type the set has no GEMM for, gets the GEMM of the first set down its fallback
    // chain that fits (AMX: AVX-512's for Q5_K); every set gives the reference's bits, so which
    // one runs never shows in the logits.
    // group_fn: the same set's GEMM over the type's row groups, nullptr where it has none.
    struct Gemm {
        GemmTileFn fn;
        GemmShape shape;
        GroupGemmFn group_fn;
    };
    Gemm gemm_for_weights(TensorType type, std::int64_t n_tokens) const {
        const TypeRow& row = weight_row(type);
        Isa set = isa;
        while (set != Isa::scalar &&
               (n_tokens < kGemmShapes[int(set)].min_tokens || row.gemms[std::size_t(set)] == nullptr))
            set = fallback_isa(set);
        return {row.gemms[std::size_t(set)], kGemmShapes[int(set)], row.row_groups.gemms[std::size_t(set)]};
    }
};

// Whether this build contains the kernel set at all (independent of the CPU).
inline bool isa_compiled(Isa isa) {
    switch (isa) {
        case Isa::scalar: return true;
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: return true;
#endif
#if SMOL_HAVE_AVX_VNNI_KERNELS
        case Isa::avx_vnni: return true;
#endif
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: return true;
#endif
#if SMOL_HAVE_AMX_KERNELS
        case Isa::amx: return true;
#endif
#if SMOL_HAVE_NEON_KERNELS
        case Isa::neon: return true;
#endif
#if SMOL_HAVE_DOTPROD_KERNELS
        case Isa::dotprod: return true;
#endif
#if SMOL_HAVE_I8MM_KERNELS
        case Isa::i8mm: return true;
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
    return KernelSet{isa};
}

// A row of n values of a type made from the floats x, for checking and counting kernels: x
// through the type's reference quantizer; for a type smol reads but cannot write (IQ4_NL,
// IQ4_XS), whose every byte pattern is a block once the fp16 scale d that opens it is finite,
// bytes taken from x's bits and each block's d from its first value.
inline void encode_test_row(TensorType type, const float* x, void* out, std::int64_t n) {  // x: [n]
    const TypeRow& row = type_row(type, "encode_test_row");
    if (row.from_float[0] != nullptr) return row.from_float[0](x, out, n);
    static_assert(offsetof(BlockIQ4NL, d) == 0 && offsetof(BlockIQ4XS, d) == 0);
    if (type != TensorType::IQ4_NL && type != TensorType::IQ4_XS)
        fail("encode_test_row: expected a type with a quantizer, IQ4_NL or IQ4_XS, found ", type_name(type));
    auto* bytes = static_cast<std::uint8_t*>(out);
    const std::size_t blocks = std::size_t(n) / row.block_elements;
    for (std::size_t i = 0; i < blocks * row.block_bytes; ++i)  // fewer bytes than values
        bytes[i] = std::uint8_t(std::bit_cast<std::uint32_t>(x[i]) >> 7);
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::uint16_t d = f32_to_fp16(x[b * row.block_elements] / 64.0f);
        std::memcpy(bytes + b * row.block_bytes, &d, sizeof d);
    }
}

// Checks one prompt GEMM, and its group form where it has one, against the reference tiles on a
// small seeded problem (a full call: shape.rows weight rows of 2 blocks, shape.tokens tokens; the
// group form over kGroupRows such rows made a row group, both halves). Returns "" when every output
// has the reference's bits, else what differed first.
inline std::string gemm_disagreement(TensorType type, const KernelSet::Gemm& gemm) {
    constexpr std::int64_t n = 2 * QK_K;
    const GemmShape shape = gemm.shape;
    const TypeRow& row = weight_row(type);
    std::uint32_t state = 0x9e3779b9u;  // xorshift: a fixed, portable sequence
    const auto next = [&state] {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return float(std::int32_t(state % 2001) - 1000) / 997.0f;
    };
    const int n_rows = gemm.group_fn ? std::max(shape.rows, kGroupRows) : shape.rows;
    const std::size_t row_bytes = std::size_t(n) / row.block_elements * row.block_bytes;
    std::vector<float> x(static_cast<std::size_t>(n));
    std::vector<std::uint8_t> weights(std::size_t(n_rows) * row_bytes);
    for (int r = 0; r < n_rows; ++r) {
        for (float& v : x) v = next();
        encode_test_row(type, x.data(), weights.data() + std::size_t(r) * row_bytes, n);
    }
    std::vector<BlockQ8K> acts(std::size_t(shape.tokens) * std::size_t(n / QK_K));
    for (int t = 0; t < shape.tokens; ++t) {
        for (float& v : x) v = next();
        quantize_row_q8_k(x.data(), acts.data() + std::size_t(t) * std::size_t(n / QK_K), n);
    }
    const std::size_t groups = std::size_t(packed_groups(shape.tokens));
    std::vector<BlockQ8Kx16> packed(groups * std::size_t(n / QK_K));
    pack_q8k_x16(acts.data(), shape.tokens, n / QK_K, packed.data());
    const auto out_size = std::size_t(shape.tokens) * std::size_t(n_rows);
    std::vector<float> expected(out_size);  // [token][row]
    for (int t = 0; t < shape.tokens; ++t)
        row.tiles[0](n, weights.data(), row_bytes, n_rows,
                     reinterpret_cast<const std::uint8_t*>(acts.data() + std::size_t(t) * std::size_t(n / QK_K)),
                     sizeof(BlockQ8K) * std::size_t(n / QK_K), 1, expected.data() + std::size_t(t) * std::size_t(n_rows),
                     std::size_t(n_rows));
    // The first difference in rows [0, rows) of `got` ([token][row], n_rows a token), or "".
    const auto first_difference = [&](const std::vector<float>& got, int rows, const char* form) -> std::string {
        for (int t = 0; t < shape.tokens; ++t)
            for (int r = 0; r < rows; ++r) {
                const std::size_t i = std::size_t(t) * std::size_t(n_rows) + std::size_t(r);
                if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0)
                    return concat(type_name(type), form, " row ", r, " token ", t, ": expected ", expected[i],
                                  ", found ", got[i]);
            }
        return "";
    };
    std::vector<float> got(out_size);
    gemm.fn(n, weights.data(), row_bytes, shape.rows, packed.data(), shape.tokens, got.data(), std::size_t(n_rows));
    if (std::string difference = first_difference(got, shape.rows, ""); !difference.empty()) return difference;
    if (!gemm.group_fn) return "";
    std::vector<std::uint8_t> group(std::size_t(n) / row.block_elements * row.row_groups.block_bytes);
    row.row_groups.interleave(weights.data(), row_bytes, n / std::int64_t(row.block_elements), group.data());
    for (int first = 0; first < kGroupRows; first += kTileRows)
        gemm.group_fn(n, group.data(), first, packed.data(), shape.tokens, got.data() + first, std::size_t(n_rows));
    return first_difference(got, kGroupRows, " (row groups)");
}

// Every prompt GEMM a kernel set runs for its widest batch (its own, or for a type it has none
// for, that of the set it falls back on: the i8mm set runs the dotprod set's) checked as above:
// "" when all agree.
inline std::string gemm_self_check(Isa isa) {
    const KernelSet set{isa};
    for (const TypeRow& row : kTypeTable) {
        if (!row.is_weight()) continue;
        const KernelSet::Gemm gemm = set.gemm_for_weights(row.type, kGemmShapes[std::size_t(isa)].tokens);
        if (gemm.fn == nullptr) continue;
        std::string disagreement = gemm_disagreement(row.type, gemm);
        if (!disagreement.empty()) return disagreement;
    }
    return "";
}

// The best compiled set the CPU runs, or SMOL_ISA's choice; chosen on first use. The AMX and
// AVX-VNNI sets have had little time on hardware (AVX-VNNI's tests passed and this self-check
// held on an Emerald Rapids Xeon guest, 2026-11-27; elsewhere its kernels are checked with the
// instruction emulated and in its EVEX form), so before the first use of either its GEMMs are
// checked once against the reference (a few milliseconds; AVX-VNNI's GEMMs and row-group kernels
// share the one place its instruction is written, dpbusd.hpp's VexDot); so are those the dotprod
// and i8mm sets run (the dotprod set's), which have run only under qemu. On any difference smol says so on stderr and runs the set it
// falls back on, so no user gets wrong logits from it.
inline const KernelSet& kernels() {
    static const KernelSet selected = [] {
        Isa isa = selected_isa();
        while (!isa_compiled(isa)) isa = fallback_isa(isa);
        if (isa == Isa::amx || isa == Isa::avx_vnni || isa == Isa::dotprod || isa == Isa::i8mm) {
            const std::string disagreement = gemm_self_check(isa);
            if (!disagreement.empty()) {
                std::fprintf(stderr, "smol: the %s kernels disagree with the reference (%s); using %s instead\n",
                             std::string(isa_name(isa)).c_str(), disagreement.c_str(),
                             std::string(isa_name(fallback_isa(isa))).c_str());
                isa = fallback_isa(isa);
            }
        }
        return kernels_for(isa);
    }();
    return selected;
}

}  // namespace smol
