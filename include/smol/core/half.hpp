#pragma once
// IEEE binary16 and bfloat16 conversions, bit-exact and portable (no F16C required).

#include <bit>
#include <cstdint>

namespace smol {

inline float fp16_to_f32_portable(std::uint16_t h) {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do {
                ++e;
                mantissa <<= 1;
            } while ((mantissa & 0x400u) == 0);
            bits = sign | std::uint32_t(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13;
        }
    } else if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | mantissa << 13;
    } else {
        bits = sign | (exponent + (127 - 15)) << 23 | mantissa << 13;
    }
    return std::bit_cast<float>(bits);
}

// The same bits as fp16_to_f32_portable for every half.
inline float fp16_to_f32(std::uint16_t h) {
#if defined(__aarch64__)
    // Every AArch64 core converts halves in one instruction (fcvt), exactly, except that it quiets
    // a signalling NaN (exponent all ones, quiet bit clear, payload nonzero); those keep their bits
    // through the portable path.
    if ((h & 0x7e00u) != 0x7c00u || (h & 0x1ffu) == 0) return float(std::bit_cast<__fp16>(h));
#endif
    return fp16_to_f32_portable(h);
}

// Round to nearest even, with overflow to infinity and NaN kept NaN.
inline std::uint16_t f32_to_fp16(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return std::uint16_t(sign | 0x7e00u);  // NaN
    if (abs >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
        if (abs < 0x33000000u) return std::uint16_t(sign);  // below half the smallest subnormal
        const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
        const int shift = 126 - int(abs >> 23);  // 14..24
        std::uint32_t result = mantissa >> shift;
        const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
        const std::uint32_t halfway = 1u << (shift - 1);
        if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
        return std::uint16_t(sign | result);
    }
    std::uint32_t result = ((abs >> 13) - ((127 - 15) << 10));
    const std::uint32_t remainder = abs & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
    return std::uint16_t(sign | result);
}

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t(h) << 16); }

inline std::uint16_t f32_to_bf16(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((x >> 16) | 0x40u);  // quiet NaN
    return std::uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace smol
