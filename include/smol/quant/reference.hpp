#pragma once
// Scalar ground truth for every block format smol computes with: dequantization, the Q8_K and
// Q8_0 activation quantizers and the dot products. The SIMD kernels are tested against these.
// Integer sums are formed exactly as ggml forms them, so results agree with ggml's up to the
// order in which the per-block float terms are added.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

// Round half to even, as ggml's nearest_int does (its magic-number trick rounds that way);
// std::nearbyint follows the current rounding mode, which smol never changes from the default.
inline int nearest_int(float x) { return int(std::nearbyint(x)); }

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
inline void q4k_scale_min(int j, const std::uint8_t* scales, std::uint8_t& scale, std::uint8_t& min) {
    if (j < 4) {
        scale = scales[j] & 63;
        min = scales[j + 4] & 63;
    } else {
        scale = std::uint8_t((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
        min = std::uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

// All eight scales (out[0..7]) and mins (out[8..15]) of a Q4_K block at once, with word-wide
// masks instead of q4k_scale_min's per-index branches (ggml's unpacking); the SIMD kernels use
// this or the same steps in vector registers.
inline void q4k_unpack_scales_mins(const std::uint8_t* scales, std::uint8_t* out) {
    std::uint32_t a, b, c;  // bytes 0-3 (scales 0-3 + top bits of scales 4-7), 4-7 (mins), 8-11 (low nibbles)
    std::memcpy(&a, scales, 4);
    std::memcpy(&b, scales + 4, 4);
    std::memcpy(&c, scales + 8, 4);
    const std::uint32_t six = 0x3f3f3f3fu, four = 0x0f0f0f0fu, two = 0x03030303u;
    const std::uint32_t words[4] = {
        a & six,                                      // scales 0-3
        (c & four) | (((a >> 6) & two) << 4),         // scales 4-7
        b & six,                                      // mins 0-3
        ((c >> 4) & four) | (((b >> 6) & two) << 4),  // mins 4-7
    };
    std::memcpy(out, words, 16);
}

// The 256 signed 6-bit quants of a Q6_K block (-32..31), in weight order. Each half of the block
// (128 weights) keeps its low nibbles in 64 ql bytes and its top two bits in 32 qh bytes: ql byte l
// holds weights l (low nibble) and l + 64 (high nibble), ql byte l + 32 weights l + 32 and l + 96,
// and qh byte l the top bits of l, l + 32, l + 64 and l + 96 in bit pairs 0-1, 2-3, 4-5, 6-7.
inline void q6k_unpack_quants(const BlockQ6K& block, std::int8_t* q) {  // q: [QK_K]
    for (int half = 0; half < 2; ++half) {
        const std::uint8_t* ql = block.ql + 64 * half;
        const std::uint8_t* qh = block.qh + 32 * half;
        std::int8_t* y = q + 128 * half;
        for (int l = 0; l < 32; ++l) {
            y[l] = std::int8_t(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
            y[l + 32] = std::int8_t(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
            y[l + 64] = std::int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            y[l + 96] = std::int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// The 256 quants of a Q5_K block (0..31), in weight order: chunk c (weights 64c..64c+63) is the
// low nibbles of qs[32c..32c+31] then their high nibbles, as in Q4_K, with the fifth bit of weight
// 64c + l in bit 2c of qh[l] and that of weight 64c + 32 + l in bit 2c + 1.
inline void q5k_unpack_quants(const BlockQ5K& block, std::uint8_t* q) {  // q: [QK_K]
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const int bits = block.qs[32 * c + l], high = block.qh[l];
            q[64 * c + l] = std::uint8_t((bits & 0x0f) | (((high >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = std::uint8_t((bits >> 4) | (((high >> (2 * c + 1)) & 1) << 4));
        }
}

// The 256 quants of a Q2_K block (0..3), in weight order (the layout at BlockQ2K).
inline void q2k_unpack_quants(const BlockQ2K& block, std::uint8_t* q) {  // q: [QK_K]
    for (int k = 0; k < 8; ++k)
        for (int l = 0; l < 32; ++l) q[32 * k + l] = std::uint8_t((block.qs[32 * (k / 4) + l] >> (2 * (k % 4))) & 3);
}

// The 16 signed scales of a Q3_K block (-32..31) from its 12 packed bytes, with word-wide masks
// as ggml unpacks them: byte j < 8 holds the low four bits of scale j (low nibble) and of scale
// j + 8 (high nibble); byte 8 + i the top two bits of scales i, i + 4, i + 8 and i + 12 in its bit
// pairs 0-1, 2-3, 4-5 and 6-7. Scales are stored offset by 32.
inline void q3k_unpack_scales(const std::uint8_t* packed, std::int8_t* out) {  // packed: [12], out: [16]
    std::uint32_t a, b, top;  // bytes 0-3, 4-7, 8-11
    std::memcpy(&a, packed, 4);
    std::memcpy(&b, packed + 4, 4);
    std::memcpy(&top, packed + 8, 4);
    const std::uint32_t four = 0x0f0f0f0fu, two = 0x03030303u;
    const std::uint32_t words[4] = {
        (a & four) | (((top >> 0) & two) << 4),         // scales 0-3
        (b & four) | (((top >> 2) & two) << 4),         // scales 4-7
        ((a >> 4) & four) | (((top >> 4) & two) << 4),  // scales 8-11
        ((b >> 4) & four) | (((top >> 6) & two) << 4),  // scales 12-15
    };
    std::uint8_t stored[16];
    std::memcpy(stored, words, 16);
    for (int j = 0; j < 16; ++j) out[j] = std::int8_t(stored[j] - 32);
}

// The 256 signed quants of a Q3_K block (-4..3), in weight order (the layout at BlockQ3K).
inline void q3k_unpack_quants(const BlockQ3K& block, std::int8_t* q) {  // q: [QK_K]
    for (int k = 0; k < 8; ++k)
        for (int l = 0; l < 32; ++l) {
            const int low = (block.qs[32 * (k / 4) + l] >> (2 * (k % 4))) & 3;
            const int third = (block.hmask[l] >> k) & 1;
            q[32 * k + l] = std::int8_t(low - (third ? 0 : 4));
        }
}

// ---------------------------------------------------------------------------------------------
// Dequantization

inline void dequantize_row_q4_k(const BlockQ4K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ4K& block = blocks[b];
        const float d = fp16_to_f32(block.d);
        const float dmin = fp16_to_f32(block.dmin);
        const std::uint8_t* q = block.qs;
        for (int chunk = 0; chunk < 4; ++chunk) {  // 64 weights: sub-blocks 2*chunk and 2*chunk+1
            std::uint8_t sc_lo, m_lo, sc_hi, m_hi;
            q4k_scale_min(2 * chunk, block.scales, sc_lo, m_lo);
            q4k_scale_min(2 * chunk + 1, block.scales, sc_hi, m_hi);
            const float d_lo = d * sc_lo, min_lo = dmin * m_lo;
            const float d_hi = d * sc_hi, min_hi = dmin * m_hi;
            for (int l = 0; l < 32; ++l) *out++ = d_lo * float(q[l] & 0x0f) - min_lo;
            for (int l = 0; l < 32; ++l) *out++ = d_hi * float(q[l] >> 4) - min_hi;
            q += 32;
        }
    }
}

// ggml's operations in ggml's order: d * scale and dmin * min once per sub-block of 16, then
// d_sub * q - min_sub per weight.
inline void dequantize_row_q2_k(const BlockQ2K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ2K& block = blocks[b];
        const float d = fp16_to_f32(block.d);
        const float dmin = fp16_to_f32(block.dmin);
        std::uint8_t q[QK_K];
        q2k_unpack_quants(block, q);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d_sub = d * float(block.scales[j] & 0x0f), min_sub = dmin * float(block.scales[j] >> 4);
            for (int l = 0; l < 16; ++l) *out++ = d_sub * float(q[16 * j + l]) - min_sub;
        }
    }
}

// ggml's operations: d * scale once per sub-block of 16, then times the quant.
inline void dequantize_row_q3_k(const BlockQ3K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ3K& block = blocks[b];
        const float d = fp16_to_f32(block.d);
        std::int8_t scales[16], q[QK_K];
        q3k_unpack_scales(block.scales, scales);
        q3k_unpack_quants(block, q);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d_sub = d * float(scales[j]);
            for (int l = 0; l < 16; ++l) *out++ = d_sub * float(q[16 * j + l]);
        }
    }
}

// ggml's operations in ggml's order: d * scale and dmin * min once per sub-block, then
// d_sub * q - min_sub per weight.
inline void dequantize_row_q5_k(const BlockQ5K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ5K& block = blocks[b];
        const float d = fp16_to_f32(block.d);
        const float dmin = fp16_to_f32(block.dmin);
        std::uint8_t q[QK_K];
        q5k_unpack_quants(block, q);
        for (int j = 0; j < QK_K / 32; ++j) {
            std::uint8_t sc, m;
            q4k_scale_min(j, block.scales, sc, m);
            const float d_sub = d * sc, min_sub = dmin * m;
            for (int l = 0; l < 32; ++l) *out++ = d_sub * float(q[32 * j + l]) - min_sub;
        }
    }
}

inline void dequantize_row_q6_k(const BlockQ6K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ6K& block = blocks[b];
        const float d = fp16_to_f32(block.d);
        std::int8_t q[QK_K];
        q6k_unpack_quants(block, q);
        for (int i = 0; i < QK_K; ++i) out[i] = d * float(block.scales[i / 16]) * float(q[i]);  // a scale per 16
        out += QK_K;
    }
}

inline void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK8_0; ++b) {
        const float d = fp16_to_f32(blocks[b].d);
        for (int l = 0; l < QK8_0; ++l) *out++ = d * float(blocks[b].qs[l]);
    }
}

inline void dequantize_row_q4_0(const BlockQ4_0* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK4_0; ++b, out += QK4_0) {
        const float d = fp16_to_f32(blocks[b].d);
        for (int l = 0; l < QK4_0 / 2; ++l) {
            out[l] = d * float((blocks[b].qs[l] & 0x0f) - 8);
            out[l + QK4_0 / 2] = d * float((blocks[b].qs[l] >> 4) - 8);
        }
    }
}

// value = d * q + m; d * q is exact (an 11-bit significand times 4 bits), so whether a compiler
// fuses the multiply-add or not, this is ggml's `x0*d + m` bit for bit.
inline void dequantize_row_q4_1(const BlockQ4_1* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK4_1; ++b, out += QK4_1) {
        const float d = fp16_to_f32(blocks[b].d), m = fp16_to_f32(blocks[b].m);
        for (int l = 0; l < QK4_1 / 2; ++l) {
            out[l] = float(blocks[b].qs[l] & 0x0f) * d + m;
            out[l + QK4_1 / 2] = float(blocks[b].qs[l] >> 4) * d + m;
        }
    }
}

// The 32 five-bit quants of a Q5_0 or Q5_1 block, 0..31, in weight order (Q5_0's value is
// q - 16, Q5_1's d * q + m).
template <class Block>
inline void q5_unpack_quants(const Block& block, std::uint8_t* q) {  // q: [QK5_0]
    std::uint32_t qh;
    std::memcpy(&qh, block.qh, sizeof(qh));
    for (int l = 0; l < QK5_0 / 2; ++l) {
        q[l] = std::uint8_t((block.qs[l] & 0x0f) | (((qh >> l) & 1) << 4));
        q[l + QK5_0 / 2] = std::uint8_t((block.qs[l] >> 4) | (((qh >> (l + QK5_0 / 2)) & 1) << 4));
    }
}

inline void dequantize_row_q5_0(const BlockQ5_0* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK5_0; ++b, out += QK5_0) {
        const float d = fp16_to_f32(blocks[b].d);
        std::uint8_t q[QK5_0];
        q5_unpack_quants(blocks[b], q);
        for (int l = 0; l < QK5_0; ++l) out[l] = d * float(int(q[l]) - 16);
    }
}

// value = d * q + m, exact before the add as Q4_1's: ggml's `x0*d + m` bit for bit.
inline void dequantize_row_q5_1(const BlockQ5_1* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK5_1; ++b, out += QK5_1) {
        const float d = fp16_to_f32(blocks[b].d), m = fp16_to_f32(blocks[b].m);
        std::uint8_t q[QK5_1];
        q5_unpack_quants(blocks[b], q);
        for (int l = 0; l < QK5_1; ++l) out[l] = float(q[l]) * d + m;
    }
}

inline void dequantize_row_iq4_nl(const BlockIQ4NL* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK4_NL; ++b, out += QK4_NL) {
        const float d = fp16_to_f32(blocks[b].d);
        for (int l = 0; l < QK4_NL / 2; ++l) {
            out[l] = d * float(kIq4nlValues[blocks[b].qs[l] & 0x0f]);
            out[l + QK4_NL / 2] = d * float(kIq4nlValues[blocks[b].qs[l] >> 4]);
        }
    }
}

// The eight sub-block scales of an IQ4_XS block, -32..31 (the stored 6-bit value less 32).
inline void iq4xs_unpack_scales(const BlockIQ4XS& block, std::int8_t* out) {  // out: [8]
    for (int j = 0; j < QK_K / 32; ++j) {
        const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f, high = (block.scales_h >> (2 * j)) & 3;
        out[j] = std::int8_t((low | (high << 4)) - 32);
    }
}

// The signed values (kIq4nlValues) of an IQ4_XS block's 256 weights, in weight order.
inline void iq4xs_unpack_values(const BlockIQ4XS& block, std::int8_t* v) {  // v: [QK_K]
    for (int j = 0; j < QK_K / 32; ++j)
        for (int l = 0; l < 16; ++l) {
            v[32 * j + l] = kIq4nlValues[block.qs[16 * j + l] & 0x0f];
            v[32 * j + l + 16] = kIq4nlValues[block.qs[16 * j + l] >> 4];
        }
}

// ggml's order: the sub-block's scale d * (s - 32) first, then times the value.
inline void dequantize_row_iq4_xs(const BlockIQ4XS* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b, out += QK_K) {
        const float d = fp16_to_f32(blocks[b].d);
        std::int8_t scales[QK_K / 32], v[QK_K];
        iq4xs_unpack_scales(blocks[b], scales);
        iq4xs_unpack_values(blocks[b], v);
        for (int l = 0; l < QK_K; ++l) out[l] = (d * float(scales[l / 32])) * float(v[l]);
    }
}

// Q8_K activations back as floats (d * q), for tests that measure a product's magnitude.
inline void dequantize_row_q8_k(const BlockQ8K* blocks, float* out, std::int64_t n) {  // out: [n]
    for (std::int64_t b = 0; b < n / QK_K; ++b, out += QK_K)
        for (int l = 0; l < QK_K; ++l) out[l] = blocks[b].d * float(blocks[b].qs[l]);
}

// The float formats, one value per "block".
inline void dequantize_row_f32(const float* row, float* out, std::int64_t n) {
    std::memcpy(out, row, std::size_t(n) * sizeof(float));
}
inline void dequantize_row_f16(const std::uint16_t* row, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(row[i]);
}
inline void dequantize_row_bf16(const std::uint16_t* row, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(row[i]);
}

// ---------------------------------------------------------------------------------------------
// Activation quantizers

// ggml's quantize_row_q8_K_ref: the value of largest magnitude maps to -127 exactly, so the
// others land in [-127, 127] (the min() only guards float rounding at the +127 end).
inline void quantize_row_q8_k(const float* x, BlockQ8K* out, std::int64_t n) {  // x: [n]
    if (n % QK_K != 0) fail("quantize_row_q8_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ8K& block = out[b];
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            block.d = 0.0f;
            std::memset(block.qs, 0, sizeof(block.qs));
            std::memset(block.bsums, 0, sizeof(block.bsums));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; ++j) {
            const int v = nearest_int(iscale * x[j]);
            block.qs[j] = std::int8_t(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += block.qs[16 * j + l];
            block.bsums[j] = std::int16_t(sum);
        }
        block.d = 1.0f / iscale;
    }
}

// ggml's quantize_row_q8_0_ref: symmetric, d = amax/127, round half away from zero.
inline void quantize_row_q8_0(const float* x, BlockQ8_0* out, std::int64_t n) {  // x: [n]
    if (n % QK8_0 != 0) fail("quantize_row_q8_0: row length must be a multiple of ", QK8_0, ", got ", n);
    for (std::int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; ++j) out[b].qs[j] = std::int8_t(std::round(x[j] * id));
    }
}

// ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8, so d = max / -8 keeps
// its sign; quants are truncated after adding 8.5 and clamped to 15.
inline void quantize_row_q4_0(const float* x, BlockQ4_0* out, std::int64_t n) {  // x: [n]
    if (n % QK4_0 != 0) fail("quantize_row_q4_0: row length must be a multiple of ", QK4_0, ", got ", n);
    for (std::int64_t b = 0; b < n / QK4_0; ++b, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; ++j)
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const int lo = std::min(15, int(x[j] * id + 8.5f));
            const int hi = std::min(15, int(x[j + QK4_0 / 2] * id + 8.5f));
            out[b].qs[j] = std::uint8_t(lo | (hi << 4));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products (n weights; n a multiple of the block size)

// The exact integer parts of one Q4_K x Q8_K block product:
// dot = sum_j sc_j * (q4 . q8 over sub-block j), mins = sum_j m_j * (bsum_{2j} + bsum_{2j+1}).
struct Q4KBlockSums {
    std::int32_t dot;
    std::int32_t mins;
};

inline Q4KBlockSums q4k_q8k_block_sums(const BlockQ4K& w, const BlockQ8K& a) {
    Q4KBlockSums sums{0, 0};
    const std::uint8_t* q = w.qs;
    const std::int8_t* q8 = a.qs;
    for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
        std::uint8_t sc_lo, m_lo, sc_hi, m_hi;
        q4k_scale_min(2 * chunk, w.scales, sc_lo, m_lo);
        q4k_scale_min(2 * chunk + 1, w.scales, sc_hi, m_hi);
        std::int32_t lo = 0, hi = 0;
        for (int l = 0; l < 32; ++l) lo += std::int32_t(q[l] & 0x0f) * q8[l];
        for (int l = 0; l < 32; ++l) hi += std::int32_t(q[l] >> 4) * q8[32 + l];
        q8 += 64;
        sums.dot += std::int32_t(sc_lo) * lo + std::int32_t(sc_hi) * hi;
        sums.mins += std::int32_t(m_lo) * (a.bsums[4 * chunk] + a.bsums[4 * chunk + 1]) +
                     std::int32_t(m_hi) * (a.bsums[4 * chunk + 2] + a.bsums[4 * chunk + 3]);
    }
    return sums;
}

// The k-quant dot products define the bits every kernel set must reproduce: per block, the
// exact integer sums, then one float step per term in block order with explicit fused
// multiply-adds (a compiler may not contract them differently). Kernels that hold 8 lanes of one
// row, or 16 tokens of one row, all reach these same bits, so a sequence's logits depend neither
// on the CPU nor on what else shares its batch.
inline float q4k_accumulate_block(float sum, float d, float dmin, float ad, std::int32_t dot, std::int32_t mins) {
    sum = std::fma(d * ad, float(dot), sum);
    return std::fma(-(dmin * ad), float(mins), sum);
}

inline float q6k_accumulate_block(float sum, float d, float ad, std::int32_t dot) {
    return std::fma(d * ad, float(dot), sum);
}

// The one loop of the k-quant dot products: per block the exact integer sums, block_sums(w, a),
// then the float step, q4k_accumulate_block for the types with mins (block_sums gives
// Q4KBlockSums) or q6k_accumulate_block (it gives the total).
template <auto block_sums, class Weight>
inline float kquant_dot(std::int64_t n, const Weight* w, const BlockQ8K* a) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const auto s = block_sums(w[b], a[b]);
        if constexpr (std::is_same_v<std::remove_const_t<decltype(s)>, Q4KBlockSums>)
            sum = q4k_accumulate_block(sum, fp16_to_f32(w[b].d), fp16_to_f32(w[b].dmin), a[b].d, s.dot, s.mins);
        else
            sum = q6k_accumulate_block(sum, fp16_to_f32(w[b].d), a[b].d, s);
    }
    return sum;
}

inline float dot_q4k_q8k(std::int64_t n, const BlockQ4K* w, const BlockQ8K* a) {
    return kquant_dot<q4k_q8k_block_sums>(n, w, a);
}

// The two integer sums of a block whose unsigned quants q have a scale and a min per sub-block
// (Q5_K: 8 of 32 weights, Q2_K: 16 of 16): dot = sum_j scale_j * (q . q8 over sub-block j),
// mins = sum_j min_j * (the bsums of sub-block j). They meet d and dmin in q4k_accumulate_block.
template <int SubBlocks>
inline Q4KBlockSums scale_min_block_sums(const std::uint8_t* q, const std::uint8_t* scales, const std::uint8_t* mins,
                                         const BlockQ8K& a) {
    constexpr int size = QK_K / SubBlocks, bsums_per_sub_block = size / 16;
    Q4KBlockSums sums{0, 0};
    for (int j = 0; j < SubBlocks; ++j) {
        std::int32_t sub = 0, bsum = 0;
        for (int l = size * j; l < size * (j + 1); ++l) sub += std::int32_t(q[l]) * a.qs[l];
        for (int k = 0; k < bsums_per_sub_block; ++k) bsum += a.bsums[bsums_per_sub_block * j + k];
        sums.dot += std::int32_t(scales[j]) * sub;
        sums.mins += std::int32_t(mins[j]) * bsum;
    }
    return sums;
}

inline Q4KBlockSums q5k_q8k_block_sums(const BlockQ5K& w, const BlockQ8K& a) {
    std::uint8_t q[QK_K], scales_mins[16];  // [8 scales, 8 mins]
    q5k_unpack_quants(w, q);
    q4k_unpack_scales_mins(w.scales, scales_mins);
    return scale_min_block_sums<8>(q, scales_mins, scales_mins + 8, a);
}

// Q5_K takes Q4_K's float step: d * ad * dot, then - dmin * ad * mins.
inline float dot_q5k_q8k(std::int64_t n, const BlockQ5K* w, const BlockQ8K* a) {
    return kquant_dot<q5k_q8k_block_sums>(n, w, a);
}

inline Q4KBlockSums q2k_q8k_block_sums(const BlockQ2K& w, const BlockQ8K& a) {
    std::uint8_t q[QK_K], scales[16], mins[16];
    q2k_unpack_quants(w, q);
    for (int j = 0; j < 16; ++j) {
        scales[j] = w.scales[j] & 0x0f;
        mins[j] = w.scales[j] >> 4;
    }
    return scale_min_block_sums<16>(q, scales, mins, a);
}

// Q2_K takes Q4_K's float step: d * ad * dot, then - dmin * ad * mins.
inline float dot_q2k_q8k(std::int64_t n, const BlockQ2K* w, const BlockQ8K* a) {
    return kquant_dot<q2k_q8k_block_sums>(n, w, a);
}

// The integer sum of a block whose signed quants q have a signed scale per sub-block of 16 and no
// min (Q3_K, Q6_K): sum_j scale_j * (q . q8 over sub-block j), exact.
inline std::int32_t sixteen_scale_block_sum(const std::int8_t* q, const std::int8_t* scales, const BlockQ8K& a) {
    std::int32_t total = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        std::int32_t sub = 0;
        for (int l = 16 * j; l < 16 * j + 16; ++l) sub += std::int32_t(q[l]) * a.qs[l];
        total += std::int32_t(scales[j]) * sub;
    }
    return total;
}

inline std::int32_t q3k_q8k_block_sum(const BlockQ3K& w, const BlockQ8K& a) {
    std::int8_t scales[16], q[QK_K];
    q3k_unpack_scales(w.scales, scales);
    q3k_unpack_quants(w, q);
    return sixteen_scale_block_sum(q, scales, a);
}

// Q3_K takes Q6_K's float step: d * ad * total.
inline float dot_q3k_q8k(std::int64_t n, const BlockQ3K* w, const BlockQ8K* a) {
    return kquant_dot<q3k_q8k_block_sum>(n, w, a);
}

// q6k_unpack_quants gives q6 - 32, so the offset is in the sum.
inline std::int32_t q6k_q8k_block_sum(const BlockQ6K& w, const BlockQ8K& a) {
    std::int8_t q[QK_K];
    q6k_unpack_quants(w, q);
    return sixteen_scale_block_sum(q, w.scales, a);
}

inline float dot_q6k_q8k(std::int64_t n, const BlockQ6K* w, const BlockQ8K* a) {
    return kquant_dot<q6k_q8k_block_sum>(n, w, a);
}

// IQ4_XS against Q8_K (as ggml pairs them): sum_j (s_j - 32) * (values . q8 over sub-block j of
// 32), exact (at most 8 * 32 * 32 * 127 * 128 in magnitude), then Q6_K's float step d * ad * total.
inline std::int32_t iq4xs_q8k_block_sum(const BlockIQ4XS& w, const BlockQ8K& a) {
    std::int8_t scales[QK_K / 32], v[QK_K];
    iq4xs_unpack_scales(w, scales);
    iq4xs_unpack_values(w, v);
    std::int32_t total = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        std::int32_t sub = 0;
        for (int l = 32 * j; l < 32 * j + 32; ++l) sub += std::int32_t(v[l]) * a.qs[l];
        total += std::int32_t(scales[j]) * sub;
    }
    return total;
}

inline float dot_iq4xs_q8k(std::int64_t n, const BlockIQ4XS* w, const BlockQ8K* a) {
    return kquant_dot<iq4xs_q8k_block_sum>(n, w, a);
}

inline float dot_q8_0_q8_0(std::int64_t n, const BlockQ8_0* w, const BlockQ8_0* a) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < n / QK8_0; ++b) {
        std::int32_t isum = 0;
        for (int l = 0; l < QK8_0; ++l) isum += std::int32_t(w[b].qs[l]) * a[b].qs[l];
        sum += fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d) * float(isum);
    }
    return sum;
}

// ---------------------------------------------------------------------------------------------
// The block-of-32 weight formats (Q4_0, ...) against Q8_0 activations. Per block the exact
// integer dot of the signed weight quants with the activation quants, then one float step with
// an explicit fused multiply-add into partial sum b % 8 of block b:
//   s[b % 8] = fma(d_w * d_a, float(dot), s[b % 8])
// and at the end s is added as ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). The SIMD
// tiles hold a row's eight partial sums in the lanes of one vector (a block of 32 is too small
// to reduce its integers to one lane per block cheaply: eight blocks are reduced at once) and
// add them as hsum does, so every kernel set and tile shape gives these bits.

inline constexpr int kBlock32Lanes = 8;

// The exact sum of a Q8_0 block's 32 quants.
inline std::int32_t q8_0_block_sum(const BlockQ8_0& a) {
    std::int32_t sum = 0;
    for (int l = 0; l < QK8_0; ++l) sum += a.qs[l];
    return sum;
}

inline float block32_accumulate(float sum, float d, float ad, std::int32_t dot) {
    return std::fma(d * ad, float(dot), sum);
}

inline float block32_reduce(const float (&s)[kBlock32Lanes]) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

// sum over the block of (q - 8) * a, exact.
inline std::int32_t q4_0_q8_0_block_dot(const BlockQ4_0& w, const BlockQ8_0& a) {
    std::int32_t dot = 0;
    for (int l = 0; l < QK4_0 / 2; ++l) {
        dot += std::int32_t((w.qs[l] & 0x0f) - 8) * a.qs[l];
        dot += std::int32_t((w.qs[l] >> 4) - 8) * a.qs[l + QK4_0 / 2];
    }
    return dot;
}

// The one loop of the block-of-32 dot products: per block block_dot(w, a), exact, and its float
// step into the block's partial sum; for a format with a min m (Q4_1), its step after.
template <auto block_dot, class Weight>
inline float block32_dot(std::int64_t n, const Weight* w, const BlockQ8_0* a) {
    float s[kBlock32Lanes] = {};
    for (std::int64_t b = 0; b < n / QK8_0; ++b) {
        float& lane = s[b % kBlock32Lanes];
        const float ad = fp16_to_f32(a[b].d);
        lane = block32_accumulate(lane, fp16_to_f32(w[b].d), ad, block_dot(w[b], a[b]));
        if constexpr (requires { w[b].m; }) lane = block32_accumulate(lane, fp16_to_f32(w[b].m), ad, q8_0_block_sum(a[b]));
    }
    return block32_reduce(s);
}

inline float dot_q4_0_q8_0(std::int64_t n, const BlockQ4_0* w, const BlockQ8_0* a) {
    return block32_dot<q4_0_q8_0_block_dot>(n, w, a);
}

// Q4_1's value d * q + m gives two terms per block: d * d_a * (q . a) and m * d_a * (sum of a),
// both exact integers before the scales, each one fused step into the block's partial sum:
//   s[b % 8] = fma(d * d_a, float(q . a), s[b % 8]);  s[b % 8] = fma(m * d_a, float(sum a), s[b % 8])
// The activation sum comes from the Q8_0 block's quants, exactly (the tiles form it once per
// tile and share it among the rows), where ggml's Q8_1 stores d_a * sum rounded to fp16.
inline std::int32_t q4_1_q8_0_block_dot(const BlockQ4_1& w, const BlockQ8_0& a) {
    std::int32_t dot = 0;
    for (int l = 0; l < QK4_1 / 2; ++l) {
        dot += std::int32_t(w.qs[l] & 0x0f) * a.qs[l];
        dot += std::int32_t(w.qs[l] >> 4) * a.qs[l + QK4_1 / 2];
    }
    return dot;
}

inline float dot_q4_1_q8_0(std::int64_t n, const BlockQ4_1* w, const BlockQ8_0* a) {
    return block32_dot<q4_1_q8_0_block_dot>(n, w, a);
}

// sum over the block of (q - 16) * a, exact.
inline std::int32_t q5_0_q8_0_block_dot(const BlockQ5_0& w, const BlockQ8_0& a) {
    std::uint8_t q[QK5_0];
    q5_unpack_quants(w, q);
    std::int32_t dot = 0;
    for (int l = 0; l < QK5_0; ++l) dot += (std::int32_t(q[l]) - 16) * a.qs[l];
    return dot;
}

inline float dot_q5_0_q8_0(std::int64_t n, const BlockQ5_0* w, const BlockQ8_0* a) {
    return block32_dot<q5_0_q8_0_block_dot>(n, w, a);
}

// Q5_1 takes Q4_1's two steps: d * d_a * (q . a) with unsigned q, then m * d_a * (sum of a).
inline std::int32_t q5_1_q8_0_block_dot(const BlockQ5_1& w, const BlockQ8_0& a) {
    std::uint8_t q[QK5_1];
    q5_unpack_quants(w, q);
    std::int32_t dot = 0;
    for (int l = 0; l < QK5_1; ++l) dot += std::int32_t(q[l]) * a.qs[l];
    return dot;
}

inline float dot_q5_1_q8_0(std::int64_t n, const BlockQ5_1* w, const BlockQ8_0* a) {
    return block32_dot<q5_1_q8_0_block_dot>(n, w, a);
}

// sum over the block of kIq4nlValues[q] * a, exact. (ggml pairs IQ4_NL with Q8_0 too.)
inline std::int32_t iq4_nl_q8_0_block_dot(const BlockIQ4NL& w, const BlockQ8_0& a) {
    std::int32_t dot = 0;
    for (int l = 0; l < QK4_NL / 2; ++l) {
        dot += std::int32_t(kIq4nlValues[w.qs[l] & 0x0f]) * a.qs[l];
        dot += std::int32_t(kIq4nlValues[w.qs[l] >> 4]) * a.qs[l + QK4_NL / 2];
    }
    return dot;
}

inline float dot_iq4_nl_q8_0(std::int64_t n, const BlockIQ4NL* w, const BlockQ8_0* a) {
    return block32_dot<iq4_nl_q8_0_block_dot>(n, w, a);
}

// Float weights against float activations; accumulated in double so the reference is the
// most accurate value the SIMD versions can be measured against.
inline float dot_f32(std::int64_t n, const float* w, const float* x) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += double(w[i]) * x[i];
    return float(sum);
}

inline float dot_f16(std::int64_t n, const std::uint16_t* w, const float* x) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += double(fp16_to_f32(w[i])) * x[i];
    return float(sum);
}

inline float dot_bf16(std::int64_t n, const std::uint16_t* w, const float* x) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += double(bf16_to_f32(w[i])) * x[i];
    return float(sum);
}

}  // namespace smol
