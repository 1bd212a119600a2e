#pragma once
// Weight quantizers: float rows to k-quant (Q2_K to Q6_K), Q8_0, Q4_0, Q4_1 and Q5_0 blocks with
// ggml's reference algorithms (make_qkx2_quants for Q2_K/Q4_K/Q5_K scales and mins, make_q3_quants
// for Q3_K, make_qx_quants for Q6_K), so a model written by smol's synthesis tool quantizes the way
// llama.cpp's quantize tool would without an imatrix.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/core/tensor_types.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/reference.hpp"

namespace smol {

namespace quantize_detail {

inline constexpr float kGroupMaxEps = 1e-15f;

// How make_qkx2_quants weighs a weight's error when it compares candidate fits.
enum class FitError { squared, absolute };

// Fits x ~ scale * L + min with L in [0, nmax] and min <= 0 by weighted least squares, trying
// nstep+1 candidate scales around nmax/(max-min) and keeping the one of least weighted error
// (squared, or absolute as Q2_K asks). Returns the scale; *neg_min = -min >= 0.
inline float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L,
                              float* neg_min, std::uint8_t* Laux, float rmin, float rdelta, int nstep,
                              FitError fit_error) {
    const auto weighted_error = [fit_error](float w, float diff) {
        return fit_error == FitError::absolute ? w * std::fabs(diff) : w * diff * diff;
    };
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = float(nmax) / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = std::uint8_t(std::max(0, std::min(nmax, l)));
        best_error += weighted_error(weights[i], scale * float(L[i]) + min - x[i]);
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = std::uint8_t(l);
            const float w = weights[i];
            sum_l += w * float(l);
            sum_l2 += w * float(l) * float(l);
            sum_xl += w * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) cur_error += weighted_error(weights[i], this_scale * float(Laux[i]) + this_min - x[i]);
            if (cur_error < best_error) {
                std::memcpy(L, Laux, std::size_t(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

// The first of x[0..n) with the largest magnitude (0 for none above 0; NaNs are passed over).
inline float largest_magnitude(int n, const float* x) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

// The smallest and largest of x[0..n), n >= 1, compared in ggml's order (from x[0] on).
struct ValueRange {
    float min, max;
};
inline ValueRange value_range(int n, const float* x) {
    ValueRange r{x[0], x[0]};
    for (int j = 1; j < n; ++j) {
        r.min = std::min(r.min, x[j]);
        r.max = std::max(r.max, x[j]);
    }
    return r;
}

// Symmetric fit x ~ scale * (L - nmax), L - nmax in [-nmax, nmax-1], weighting by x^2 and
// trying 18 scales near -nmax/max. Returns the scale (sign chosen so max maps to -nmax).
inline float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L) {
    const float max = largest_magnitude(n, x);
    if (std::fabs(max) < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = -float(nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = std::int8_t(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = std::int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Symmetric fit x ~ scale * L, L in [-nmax, nmax-1], weighting by x^2: starts from the scale
// that maps the largest magnitude to -nmax, then (up to 5 rounds) moves single quants wherever
// that raises the fit's sumlx^2 / suml2. Returns the scale; L gets l + nmax (0..2 nmax - 1).
inline float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L) {
    const float max = largest_magnitude(n, x);
    if (std::fabs(max) < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -float(nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = std::int8_t(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    for (int round = 0; round < 5; ++round) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * float(L[i]);
            if (slx > 0) {
                float sl2 = suml2 - w * float(L[i]) * float(L[i]);
                const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (l != L[i]) {
                    slx += w * x[i] * float(l);
                    sl2 += w * float(l) * float(l);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = std::int8_t(l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = std::int8_t(L[i] + nmax);
    return sumlx / suml2;
}

// Q4_K and Q5_K scale/min bytes: 6-bit scale ls and min lm of sub-block j (0..7), packed as
// q4k_scale_min() unpacks them. scales must start zeroed.
inline void pack_scale_min_k4(int j, int ls, int lm, std::uint8_t* scales) {
    if (j < 4) {
        scales[j] = std::uint8_t(ls);
        scales[j + 4] = std::uint8_t(lm);
    } else {
        scales[j + 4] = std::uint8_t((ls & 0x0f) | ((lm & 0x0f) << 4));
        scales[j - 4] |= std::uint8_t((ls >> 4) << 6);
        scales[j] |= std::uint8_t((lm >> 4) << 6);
    }
}

// Q4_K's and Q5_K's fit (ggml's quantize_row_q4_K_ref and q5_K_ref differ only in the quants'
// range and the search): per sub-block of 32, make_qkx2_quants over 0..nmax weighted by
// rms + |x|, then the scales and mins as 6-bit fractions of their largest, and the quants
// requantized against the scales as stored (6-bit, fp16) so rounding is not compounded.
// Sets y.d, y.dmin and y.scales; L[i]: the quant of x[i], 0..nmax.
template <class Block>
inline void fit_scale_min_k4(const float* x, int nmax, float rmin, int nstep, Block& y, std::uint8_t (&L)[QK_K]) {
    std::uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, FitError::squared);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    std::memset(y.scales, 0, sizeof(y.scales));
    for (int j = 0; j < 8; ++j)
        pack_scale_min_k4(j, std::min(63, nearest_int(inv_scale * scales[j])), std::min(63, nearest_int(inv_min * mins[j])),
                          y.scales);
    y.d = f32_to_fp16(max_scale / 63.0f);
    y.dmin = f32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; ++j) {
        std::uint8_t sc, m;
        q4k_scale_min(j, y.scales, sc, m);
        const float d = fp16_to_f32(y.d) * float(sc);
        if (d == 0.0f) continue;
        const float dm = fp16_to_f32(y.dmin) * float(m);
        for (int i = 0; i < 32; ++i) {
            const int l = nearest_int((x[32 * j + i] + dm) / d);
            L[32 * j + i] = std::uint8_t(std::max(0, std::min(nmax, l)));
        }
    }
}

// Q2_K's and Q3_K's two low bits of each quant (Lq[i] < 4): weight 32k + l (chunk k = 0..7) in
// bit pair 2 (k % 4) of qs[32 (k / 4) + l].
template <class Quant>
inline void pack_low_bit_pairs(const Quant (&Lq)[QK_K], std::uint8_t (&qs)[QK_K / 4]) {
    for (int half = 0; half < 2; ++half)
        for (int l = 0; l < 32; ++l) {
            const Quant* Lh = Lq + 128 * half;
            qs[32 * half + l] = std::uint8_t(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
        }
}

}  // namespace quantize_detail

inline void quantize_row_q4_k(const float* x, BlockQ4K* out, std::int64_t n) {  // x: [n]
    using namespace quantize_detail;
    if (n % QK_K != 0) fail("quantize_row_q4_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ4K& y = out[b];
        std::uint8_t L[QK_K];
        fit_scale_min_k4(x, 15, -1.0f, 20, y, L);
        for (int chunk = 0; chunk < 4; ++chunk)
            for (int l = 0; l < 32; ++l)
                y.qs[32 * chunk + l] = std::uint8_t(L[64 * chunk + l] | (L[64 * chunk + 32 + l] << 4));
    }
}

// ggml's quantize_row_q2_K_ref: make_qkx2_quants over 0..3 per sub-block of 16, weighted by |x|
// and judged by absolute error, then the scales and mins as 4-bit fractions of their largest
// and the quants requantized against the stored values. (ggml leaves a negative fitted scale to
// wrap around in its byte; it is clamped to 0 here.)
inline void quantize_row_q2_k(const float* x, BlockQ2K* out, std::int64_t n) {  // x: [n]
    using namespace quantize_detail;
    if (n % QK_K != 0) fail("quantize_row_q2_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ2K& y = out[b];
        std::uint8_t L[QK_K], Laux[16];
        float weights[16], mins[QK_K / 16], scales[QK_K / 16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                         FitError::absolute);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        const float inv_scale = max_scale > 0 ? 15.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 15.0f / max_min : 0.0f;
        for (int j = 0; j < QK_K / 16; ++j) {
            const int ls = std::max(0, std::min(15, nearest_int(inv_scale * scales[j])));
            const int lm = std::max(0, std::min(15, nearest_int(inv_min * mins[j])));
            y.scales[j] = std::uint8_t(ls | lm << 4);
        }
        y.d = f32_to_fp16(max_scale > 0 ? max_scale / 15.0f : 0.0f);
        y.dmin = f32_to_fp16(max_min > 0 ? max_min / 15.0f : 0.0f);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_f32(y.d) * float(y.scales[j] & 0x0f);
            if (d == 0.0f) continue;
            const float dm = fp16_to_f32(y.dmin) * float(y.scales[j] >> 4);
            for (int i = 0; i < 16; ++i) {
                const int l = nearest_int((x[16 * j + i] + dm) / d);
                L[16 * j + i] = std::uint8_t(std::max(0, std::min(3, l)));
            }
        }
        pack_low_bit_pairs(L, y.qs);
    }
}

// ggml's quantize_row_q3_K_ref: make_q3_quants per sub-block of 16, the scale of largest
// magnitude mapped to -32 so the 6-bit scales land in [-32, 31], then requantized against the
// stored scales.
inline void quantize_row_q3_k(const float* x, BlockQ3K* out, std::int64_t n) {  // x: [n]
    using namespace quantize_detail;
    if (n % QK_K != 0) fail("quantize_row_q3_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ3K& y = out[b];
        std::int8_t L[QK_K];  // q + 4, in [0, 7]
        float scales[QK_K / 16];
        for (int j = 0; j < QK_K / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = largest_magnitude(QK_K / 16, scales);
        std::memset(y.scales, 0, sizeof(y.scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                const int l = std::max(-32, std::min(31, nearest_int(iscale * scales[j]))) + 32;
                y.scales[j % 8] |= std::uint8_t((l & 0x0f) << (j < 8 ? 0 : 4));
                y.scales[8 + j % 4] |= std::uint8_t((l >> 4) << (2 * (j / 4)));
            }
            y.d = f32_to_fp16(1.0f / iscale);
        } else {
            y.d = f32_to_fp16(0.0f);
        }
        std::int8_t stored[16];
        q3k_unpack_scales(y.scales, stored);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_f32(y.d) * float(stored[j]);
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) {
                const int l = nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = std::int8_t(std::max(-4, std::min(3, l)) + 4);
            }
        }
        // The third bit of weight 32k + l goes to bit k of hmask[l], the low two bits to qs.
        std::memset(y.hmask, 0, sizeof(y.hmask));
        for (int i = 0; i < QK_K; ++i)
            if (L[i] > 3) {
                y.hmask[i % 32] |= std::uint8_t(1 << (i / 32));
                L[i] = std::int8_t(L[i] - 4);
            }
        pack_low_bit_pairs(L, y.qs);
    }
}

// ggml's quantize_row_q5_K_ref: Q4_K's algorithm with 5-bit quants (make_qkx2_quants over 0..31,
// a narrower search: rmin -0.5, 15 steps).
inline void quantize_row_q5_k(const float* x, BlockQ5K* out, std::int64_t n) {  // x: [n]
    using namespace quantize_detail;
    if (n % QK_K != 0) fail("quantize_row_q5_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ5K& y = out[b];
        std::uint8_t L[QK_K];
        fit_scale_min_k4(x, 31, -0.5f, 15, y, L);
        // Low nibbles as Q4_K packs them; the fifth bits into qh (q5k_unpack_quants' layout).
        std::memset(y.qh, 0, sizeof(y.qh));
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y.qs[32 * c + l] = std::uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
                y.qh[l] |= std::uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
    }
}

inline void quantize_row_q6_k(const float* x, BlockQ6K* out, std::int64_t n) {  // x: [n]
    using namespace quantize_detail;
    if (n % QK_K != 0) fail("quantize_row_q6_k: row length must be a multiple of ", QK_K, ", got ", n);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ6K& y = out[b];
        std::int8_t L[QK_K];  // q + 32, in [0, 63]
        float scales[QK_K / 16];
        for (int ib = 0; ib < QK_K / 16; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
        const float max_scale = largest_magnitude(QK_K / 16, scales);
        if (std::fabs(max_scale) < kGroupMaxEps) {
            std::memset(&y, 0, sizeof(y));
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y.d = f32_to_fp16(1.0f / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            y.scales[ib] = std::int8_t(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_f32(y.d) * float(y.scales[j]);
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) {
                const int l = nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = std::int8_t(std::max(-32, std::min(31, l)) + 32);
            }
        }
        for (int half = 0; half < 2; ++half) {
            std::uint8_t* ql = y.ql + 64 * half;
            std::uint8_t* qh = y.qh + 32 * half;
            const std::int8_t* Lh = L + 128 * half;
            for (int l = 0; l < 32; ++l) {
                const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = std::uint8_t((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                ql[l + 32] = std::uint8_t((q2 & 0x0f) | ((q4 & 0x0f) << 4));
                qh[l] = std::uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

// ggml's quantize_row_q4_1_ref: the block's range [min, max] in 15 steps, m = min; quants are
// truncated after adding 0.5 and clamped to 15.
inline void quantize_row_q4_1(const float* x, BlockQ4_1* out, std::int64_t n) {  // x: [n]
    if (n % QK4_1 != 0) fail("quantize_row_q4_1: row length must be a multiple of ", QK4_1, ", got ", n);
    for (std::int64_t b = 0; b < n / QK4_1; ++b, x += QK4_1) {
        const auto [min, max] = quantize_detail::value_range(QK4_1, x);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        out[b].m = f32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            const int lo = std::min(15, int((x[j] - min) * id + 0.5f));
            const int hi = std::min(15, int((x[j + QK4_1 / 2] - min) * id + 0.5f));
            out[b].qs[j] = std::uint8_t(lo | (hi << 4));
        }
    }
}

// ggml's quantize_row_q5_0_ref: the value of largest magnitude maps to -16, so d = max / -16
// keeps its sign; quants are truncated after adding 16.5 and clamped to 31, their bit 4 going
// to qh.
inline void quantize_row_q5_0(const float* x, BlockQ5_0* out, std::int64_t n) {  // x: [n]
    if (n % QK5_0 != 0) fail("quantize_row_q5_0: row length must be a multiple of ", QK5_0, ", got ", n);
    for (std::int64_t b = 0; b < n / QK5_0; ++b, x += QK5_0) {
        const float d = quantize_detail::largest_magnitude(QK5_0, x) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        std::uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const int lo = std::min(31, int(x[j] * id + 16.5f));
            const int hi = std::min(31, int(x[j + QK5_0 / 2] * id + 16.5f));
            out[b].qs[j] = std::uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= std::uint32_t(lo >> 4) << j;
            qh |= std::uint32_t(hi >> 4) << (j + QK5_0 / 2);
        }
        std::memcpy(out[b].qh, &qh, sizeof(qh));
    }
}

// ggml's quantize_row_q5_1_ref: the block's range [min, max] in 31 steps, m = min; quants are
// truncated after adding 0.5 (no clamp: (max - min) * id rounds to at most 31.0), bit 4 to qh.
inline void quantize_row_q5_1(const float* x, BlockQ5_1* out, std::int64_t n) {  // x: [n]
    if (n % QK5_1 != 0) fail("quantize_row_q5_1: row length must be a multiple of ", QK5_1, ", got ", n);
    for (std::int64_t b = 0; b < n / QK5_1; ++b, x += QK5_1) {
        const auto [min, max] = quantize_detail::value_range(QK5_1, x);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        out[b].m = f32_to_fp16(min);
        std::uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const int lo = int((x[j] - min) * id + 0.5f), hi = int((x[j + QK5_1 / 2] - min) * id + 0.5f);
            out[b].qs[j] = std::uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= std::uint32_t((lo >> 4) & 1) << j;
            qh |= std::uint32_t((hi >> 4) & 1) << (j + QK5_1 / 2);
        }
        std::memcpy(out[b].qh, &qh, sizeof(qh));
    }
}

// The float formats: plain conversions (round to nearest even).
inline void quantize_row_f32(const float* x, float* out, std::int64_t n) {
    std::memcpy(out, x, std::size_t(n) * sizeof(float));
}
inline void quantize_row_f16(const float* x, std::uint16_t* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = f32_to_fp16(x[i]);
}
inline void quantize_row_bf16(const float* x, std::uint16_t* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace smol
