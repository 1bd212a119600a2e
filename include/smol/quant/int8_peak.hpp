#pragma once
// The int8 multiply-add peak of a kernel set: a short loop of the one instruction (or sequence)
// its integer products are made of, on operands held in registers, with enough independent
// accumulators that only the instruction's throughput limits it. smol-bench times it per thread
// (the way it measures the memory read limit for decode) and prints a prompt's int8 MAC rate as
// a share of it: prompt processing is bound by these products, as decode is by reading weights.
//
// Every loop has the same shape, so one scalar reference says what each computes: two operand
// vectors `a` and two `b` (for AMX, tiles of 16 rows x 64 bytes), and `chains` accumulators, chain
// j multiplying a[(j / 2) % 2] with b[j % 2] once per iteration (for AMX's four chains exactly a
// 2 x 2 tile blocking). After `iterations` rounds the accumulators are stored to `sums`, chain after
// chain: each i32 lane holds iterations times its product sum, wrapping as the instructions do
// (for vpmaddubsw, whose sums are words, two i16 lanes each wrapping modulo 2^16).
// The loops over chains are unrolled (`#pragma GCC unroll`, which Clang reads too) so that every
// accumulator and operand lives in a register. Empty asm statements, which emit nothing, keep the
// compiler from shortening the work: one on each accumulator after its step (chains with equal
// operands compute equal values, which it would otherwise merge), and for AVX2 one on the
// operands before each step (its products do not depend on the accumulator, so they would be
// hoisted out of the loop).

#include <cstddef>
#include <cstdint>

#include "smol/core/cpu.hpp"
#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS
#include <immintrin.h>
#endif
#if SMOL_HAVE_AMX_KERNELS
#include "smol/quant/kernels_amx.hpp"  // TileConfig and HardwareTiles
#endif
#if SMOL_HAVE_NEON_KERNELS
#include <arm_neon.h>
#endif

namespace smol {

// The integer products a loop runs, each as its instruction defines it.
enum class Int8Product {
    dpbusd,   // vpdpbusd: per i32 lane, 4 unsigned a bytes times 4 signed b bytes, summed
    maddubs,  // vpmaddubsw + vpaddw: pairs of u8 x s8 summed with i16 saturation, each pair's sum
              // added into its own i16 lane (wrapping), as the AVX2 GEMMs sum a run of products;
              // an i32 lane of the stored sums holds two such words (low: bytes 0-1, high: 2-3)
    sdot,     // sdot: per i32 lane, 4 signed a bytes times 4 signed b bytes, summed
    smmla,    // smmla: a 2 x 8 by 8 x 2 signed product, lane 2r + c = sum over k < 8 of a[8r + k] * b[8c + k]
    tdpbusd,  // AMX: C[m][n] += sum over k < 16, i < 4 of A[m][4k + i] (u8) * B[k][4n + i] (s8)
};

struct Int8PeakLoop {
    Isa isa;
    Int8Product product;
    const char* instruction;  // as smol-bench names it
    int vector_bytes;         // one operand: a vector register, or a 16 x 64-byte tile
    int chains;               // independent accumulators
    // a: 2 * vector_bytes, b: 2 * vector_bytes; sums: chains * vector_bytes / 4 lanes (a tile's
    // C is 16 x 16 lanes, one 64-byte row per weight row, so the same count).
    void (*run)(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations, std::int32_t* sums);

    std::size_t operand_bytes() const { return 2 * std::size_t(vector_bytes); }
    std::size_t sum_lanes() const { return std::size_t(chains) * std::size_t(vector_bytes) / 4; }
    // Multiply-adds (one byte times one byte, added) of one iteration over all chains.
    std::int64_t macs_per_iteration() const {
        const std::int64_t per_chain = product == Int8Product::tdpbusd ? 16 * 16 * 64
                                       : product == Int8Product::smmla ? 4 * vector_bytes
                                                                       : vector_bytes;
        return per_chain * chains;
    }
};

// What a loop stores, computed plainly from its operands.
inline void int8_peak_reference(const Int8PeakLoop& loop, const std::uint8_t* a, const std::uint8_t* b,
                                std::int64_t iterations, std::int32_t* sums) {
    const auto u = [](std::uint8_t x) { return std::int32_t(x); };
    const auto s = [](std::uint8_t x) { return std::int32_t(std::int8_t(x)); };
    const auto saturate16 = [](std::int32_t x) { return x < -32768 ? -32768 : x > 32767 ? 32767 : x; };
    const std::size_t bytes = std::size_t(loop.vector_bytes), lanes = bytes / 4;
    for (int j = 0; j < loop.chains; ++j) {
        const std::uint8_t* av = a + std::size_t((j / 2) % 2) * bytes;
        const std::uint8_t* bv = b + std::size_t(j % 2) * bytes;
        for (std::size_t l = 0; l < lanes; ++l) {
            std::int32_t once = 0;  // the lane's sum after one iteration
            const std::uint8_t* al = av + 4 * l;
            const std::uint8_t* bl = bv + 4 * l;
            switch (loop.product) {
                case Int8Product::dpbusd:
                    for (int i = 0; i < 4; ++i) once += u(al[i]) * s(bl[i]);
                    break;
                case Int8Product::maddubs: {
                    // Each word wraps modulo 2^16 as vpaddw adds it up.
                    const auto word = [&](int i) {
                        const std::int32_t pair = saturate16(u(al[i]) * s(bl[i]) + u(al[i + 1]) * s(bl[i + 1]));
                        return std::uint32_t(std::uint16_t(std::uint64_t(std::uint32_t(pair)) * std::uint64_t(iterations)));
                    };
                    sums[std::size_t(j) * lanes + l] = std::int32_t(word(0) | word(2) << 16);
                    continue;
                }
                case Int8Product::sdot:
                    for (int i = 0; i < 4; ++i) once += s(al[i]) * s(bl[i]);
                    break;
                case Int8Product::smmla:
                    for (std::size_t k = 0; k < 8; ++k) once += s(av[8 * (l / 2) + k]) * s(bv[8 * (l % 2) + k]);
                    break;
                case Int8Product::tdpbusd: {
                    const std::size_t m = l / 16, n = l % 16;
                    for (std::size_t k = 0; k < 16; ++k)
                        for (std::size_t i = 0; i < 4; ++i) once += u(av[m * 64 + 4 * k + i]) * s(bv[k * 64 + 4 * n + i]);
                    break;
                }
            }
            // The accumulator adds `once` per iteration, wrapping modulo 2^32.
            sums[std::size_t(j) * lanes + l] = std::int32_t(std::uint32_t(once) * std::uint32_t(iterations));
        }
    }
}

namespace int8_peak_detail {

#if SMOL_HAVE_AVX512_KERNELS
inline constexpr int kAvx512Chains = 16;  // 4 operands + 16 accumulators of 32 zmm registers

SMOL_TARGET_AVX512 inline void avx512_loop(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations,
                                           std::int32_t* sums) {
    __m512i av[2], bv[2], acc[kAvx512Chains];
    for (int i = 0; i < 2; ++i) {
        av[i] = _mm512_loadu_si512(a + 64 * i);
        bv[i] = _mm512_loadu_si512(b + 64 * i);
    }
#pragma GCC unroll 16
    for (int j = 0; j < kAvx512Chains; ++j) acc[j] = _mm512_setzero_si512();
    for (std::int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16  // constant indices keep every accumulator and operand in a register
        for (int j = 0; j < kAvx512Chains; ++j) {
            acc[j] = _mm512_dpbusd_epi32(acc[j], av[(j / 2) % 2], bv[j % 2]);
            __asm__ volatile("" : "+v"(acc[j]));
        }
#pragma GCC unroll 16
    for (int j = 0; j < kAvx512Chains; ++j) _mm512_storeu_si512(sums + 16 * j, acc[j]);
}
#endif

#if SMOL_HAVE_AVX_VNNI_KERNELS
inline constexpr int kAvxVnniChains = 10;  // 4 operands + 10 accumulators of 16 ymm registers

SMOL_TARGET_AVX_VNNI inline void avx_vnni_loop(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations,
                                               std::int32_t* sums) {
    __m256i av[2], bv[2], acc[kAvxVnniChains];
    for (int i = 0; i < 2; ++i) {
        av[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * i));
        bv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 * i));
    }
#pragma GCC unroll 16
    for (int j = 0; j < kAvxVnniChains; ++j) acc[j] = _mm256_setzero_si256();
    for (std::int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16  // constant indices keep every accumulator and operand in a register
        for (int j = 0; j < kAvxVnniChains; ++j) {
            acc[j] = _mm256_dpbusd_avx_epi32(acc[j], av[(j / 2) % 2], bv[j % 2]);
            __asm__ volatile("" : "+x"(acc[j]));
        }
#pragma GCC unroll 16
    for (int j = 0; j < kAvxVnniChains; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 8 * j), acc[j]);
}
#endif

#if SMOL_HAVE_AVX2_KERNELS
// 4 operands, 8 accumulators and the products in flight fill AVX2's 16 ymm registers.
inline constexpr int kAvx2Chains = 8;

inline void avx2_loop(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations, std::int32_t* sums) {
    __m256i av[2], bv[2], acc[kAvx2Chains];
    for (int i = 0; i < 2; ++i) {
        av[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * i));
        bv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 * i));
    }
#pragma GCC unroll 16
    for (int j = 0; j < kAvx2Chains; ++j) acc[j] = _mm256_setzero_si256();
    for (std::int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16  // constant indices keep every accumulator and operand in a register
        for (int j = 0; j < kAvx2Chains; ++j) {
            __asm__ volatile("" : "+x"(av[(j / 2) % 2]), "+x"(bv[j % 2]));
            acc[j] = _mm256_add_epi16(acc[j], _mm256_maddubs_epi16(av[(j / 2) % 2], bv[j % 2]));
        }
#pragma GCC unroll 16
    for (int j = 0; j < kAvx2Chains; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 8 * j), acc[j]);
}
#endif

#if SMOL_HAVE_AMX_KERNELS
inline constexpr int kAmxChains = 4;  // C tiles 0-3; A tiles 4-5, B tiles 6-7: all 8 tiles

// The loop over a tile unit: kernels_amx.hpp's HardwareTiles, or in the tests an emulation of the
// same instructions, as for the AMX GEMMs.
template <class Tiles>
void amx_loop(Tiles& tiles, const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations, std::int32_t* sums) {
    kernels_amx::TileConfig config;
    for (int t = 0; t < 8; ++t) {
        config.rows[t] = 16;
        config.bytes_per_row[t] = 64;
    }
    tiles.configure(config);
    tiles.template load<4>(a, 64);
    tiles.template load<5>(a + 1024, 64);
    tiles.template load<6>(b, 64);
    tiles.template load<7>(b + 1024, 64);
    tiles.template zero<0>();
    tiles.template zero<1>();
    tiles.template zero<2>();
    tiles.template zero<3>();
    for (std::int64_t it = 0; it < iterations; ++it) {
        tiles.template dot_unsigned_signed<0, 4, 6>();
        tiles.template dot_unsigned_signed<1, 4, 7>();
        tiles.template dot_unsigned_signed<2, 5, 6>();
        tiles.template dot_unsigned_signed<3, 5, 7>();
    }
    tiles.template store<0>(sums, 64);
    tiles.template store<1>(sums + 256, 64);
    tiles.template store<2>(sums + 512, 64);
    tiles.template store<3>(sums + 768, 64);
    tiles.release();
}

SMOL_TARGET_AMX __attribute__((flatten)) inline void amx_hardware_loop(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations,
                                              std::int32_t* sums) {
    kernels_amx::HardwareTiles tiles;
    amx_loop(tiles, a, b, iterations, sums);
}
#endif

#if SMOL_HAVE_DOTPROD_KERNELS
inline constexpr int kSdotChains = 16;  // 4 operands + 16 accumulators of 32 vector registers

// The ARM loops, over the instruction `Step` (sdot or smmla), inlined into entry points that carry
// the instruction's target.
template <class Step>
SMOL_INLINE_INTO_SET inline void neon_loop(const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations,
                                           std::int32_t* sums) {
    int8x16_t av[2], bv[2];
    int32x4_t acc[kSdotChains];
    for (int i = 0; i < 2; ++i) {
        av[i] = vreinterpretq_s8_u8(vld1q_u8(a + 16 * i));
        bv[i] = vreinterpretq_s8_u8(vld1q_u8(b + 16 * i));
    }
#pragma GCC unroll 16
    for (int j = 0; j < kSdotChains; ++j) acc[j] = vdupq_n_s32(0);
    for (std::int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 16  // constant indices keep every accumulator and operand in a register
        for (int j = 0; j < kSdotChains; ++j) {
            acc[j] = Step::step(acc[j], av[(j / 2) % 2], bv[j % 2]);
            __asm__ volatile("" : "+w"(acc[j]));
        }
#pragma GCC unroll 16
    for (int j = 0; j < kSdotChains; ++j) vst1q_s32(sums + 4 * j, acc[j]);
}

struct SdotStep {
    SMOL_TARGET_DOTPROD static inline int32x4_t step(int32x4_t acc, int8x16_t a, int8x16_t b) {
        return vdotq_s32(acc, a, b);
    }
};
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void sdot_loop(const std::uint8_t* a, const std::uint8_t* b,
                                                                   std::int64_t iterations, std::int32_t* sums) {
    neon_loop<SdotStep>(a, b, iterations, sums);
}
#endif

#if SMOL_HAVE_I8MM_KERNELS
struct SmmlaStep {
    SMOL_TARGET_I8MM static inline int32x4_t step(int32x4_t acc, int8x16_t a, int8x16_t b) {
        return vmmlaq_s32(acc, a, b);
    }
};
SMOL_TARGET_I8MM __attribute__((flatten)) inline void smmla_loop(const std::uint8_t* a, const std::uint8_t* b,
                                                                 std::int64_t iterations, std::int32_t* sums) {
    neon_loop<SmmlaStep>(a, b, iterations, sums);
}
#endif

}  // namespace int8_peak_detail

// The loop of a kernel set, or nullptr where the set has none: scalar (no int8 instruction to
// measure), neon (Armv8.0 has no int8 dot product; its kernels widen to 16-bit products), and
// sets not compiled into this build. Runs only on a CPU that runs the set (kernels_for() checks that).
inline const Int8PeakLoop* int8_peak_loop(Isa isa) {
    using namespace int8_peak_detail;
    switch (isa) {
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: {
            static constexpr Int8PeakLoop loop{Isa::avx2, Int8Product::maddubs, "vpmaddubsw+vpaddw", 32, kAvx2Chains,
                                               avx2_loop};
            return &loop;
        }
#endif
#if SMOL_HAVE_AVX_VNNI_KERNELS
        case Isa::avx_vnni: {
            static constexpr Int8PeakLoop loop{Isa::avx_vnni, Int8Product::dpbusd, "vpdpbusd (VEX, 256-bit)", 32,
                                               kAvxVnniChains, avx_vnni_loop};
            return &loop;
        }
#endif
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: {
            static constexpr Int8PeakLoop loop{Isa::avx512, Int8Product::dpbusd, "vpdpbusd (512-bit)", 64, kAvx512Chains,
                                               avx512_loop};
            return &loop;
        }
#endif
#if SMOL_HAVE_AMX_KERNELS
        case Isa::amx: {
            static constexpr Int8PeakLoop loop{Isa::amx, Int8Product::tdpbusd, "tdpbusd", 1024, kAmxChains,
                                               amx_hardware_loop};
            return &loop;
        }
#endif
#if SMOL_HAVE_DOTPROD_KERNELS
        case Isa::dotprod: {
            static constexpr Int8PeakLoop loop{Isa::dotprod, Int8Product::sdot, "sdot", 16, kSdotChains, sdot_loop};
            return &loop;
        }
#endif
#if SMOL_HAVE_I8MM_KERNELS
        case Isa::i8mm: {
            static constexpr Int8PeakLoop loop{Isa::i8mm, Int8Product::smmla, "smmla", 16, kSdotChains, smmla_loop};
            return &loop;
        }
#endif
        default: return nullptr;
    }
}

}  // namespace smol
