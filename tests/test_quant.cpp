// Block formats: fp16/bf16 conversions, hand-built blocks dequantized to hand-derived values,
// the Q8_K/Q8_0 activation quantizers, the weight quantizers, and the reference dot products
// against dequantize-then-multiply.

#include <doctest/doctest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/quant/type_table.hpp"  // the quantizers and dequantizers, by type

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_quant {

using namespace smol;

namespace {

std::vector<float> gaussian(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

double rms(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s / double(v.size()));
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(s / double(a.size()));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// half.hpp, checked against the F16C hardware conversions (an independent implementation).

TEST_CASE("fp16 to f32 matches F16C for all 65536 halves and round-trips") {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_f32(std::uint16_t(h));
        const float hw = _cvtsh_ss(std::uint16_t(h));
        if (std::isnan(hw)) {
            REQUIRE(std::isnan(f));
            REQUIRE(std::isnan(fp16_to_f32(f32_to_fp16(f))));
            continue;
        }
        REQUIRE(std::bit_cast<std::uint32_t>(f) == std::bit_cast<std::uint32_t>(hw));
        REQUIRE(f32_to_fp16(f) == h);
    }
}

TEST_CASE("f32 to fp16 rounds like F16C at every tie, its neighbours and a sweep of all floats") {
    const auto check = [](float f) {
        const std::uint16_t hw = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const std::uint16_t sw = f32_to_fp16(f);
        if (std::isnan(f)) {
            REQUIRE((sw & 0x7c00) == 0x7c00);
            REQUIRE((sw & 0x03ff) != 0);
        } else if (sw != hw) {  // REQUIRE only on mismatch: the sweep is tens of millions of floats
            INFO("f = " << f << " bits " << std::bit_cast<std::uint32_t>(f));
            REQUIRE(sw == hw);
        }
    };
    // Midpoints between neighbouring halves are exact floats: ties, then one float ulp either side.
    for (std::uint32_t h = 0; h < 0x7c00; ++h) {
        const double lo = fp16_to_f32(std::uint16_t(h));
        const double hi = h + 1 < 0x7c00 ? double(fp16_to_f32(std::uint16_t(h + 1))) : 65536.0;
        const float mid = float((lo + hi) / 2);
        for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
            check(f);
            check(-f);
        }
    }
    for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 61) check(std::bit_cast<float>(std::uint32_t(bits)));
}

TEST_CASE("bf16 round-trips all 65536 values and rounds to nearest even") {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float f = bf16_to_f32(std::uint16_t(h));
        REQUIRE(std::bit_cast<std::uint32_t>(f) == h << 16);
        if (!std::isnan(f)) REQUIRE(f32_to_bf16(f) == h);
    }
    // 1 + 2^-8 is halfway between bf16 1.0 (0x3f80) and 1.0078125 (0x3f81): ties to even 0x3f80.
    CHECK(f32_to_bf16(1.00390625f) == 0x3f80);
    // 1.0078125 + 2^-8 is halfway between 0x3f81 and 0x3f82: ties to even 0x3f82.
    CHECK(f32_to_bf16(1.01171875f) == 0x3f82);
    CHECK(f32_to_bf16(std::nextafter(1.00390625f, 2.0f)) == 0x3f81);
}

// ---------------------------------------------------------------------------------------------
// Q8_K activation quantizer

TEST_CASE("Q8_K quantization of a hand-made block") {
    // The largest magnitude is x[0] = -127, so iscale = -127 / -127 = 1 and q = round_half_even(x).
    std::vector<float> x(QK_K, 0.0f);
    const float head[] = {-127.0f, 2.5f, 3.5f, -0.5f, 1.5f, -2.5f, 126.6f, 0.49f};
    std::memcpy(x.data(), head, sizeof(head));
    for (int i = 16; i < 32; ++i) x[i] = 1.25f;   // rounds to 1 each: bsum 16
    x[255] = -100.5f;                             // tie: rounds to the even -100
    BlockQ8K b;
    quantize_row_q8_k(x.data(), &b, QK_K);
    CHECK(b.d == 1.0f);
    const int expected_head[] = {-127, 2, 4, 0, 2, -2, 127, 0};
    for (int i = 0; i < 8; ++i) CHECK(int(b.qs[i]) == expected_head[i]);
    for (int i = 8; i < 16; ++i) CHECK(int(b.qs[i]) == 0);
    for (int i = 16; i < 32; ++i) CHECK(int(b.qs[i]) == 1);
    CHECK(int(b.qs[255]) == -100);
    CHECK(b.bsums[0] == -127 + 2 + 4 + 0 + 2 - 2 + 127 + 0);  // 6
    CHECK(b.bsums[1] == 16);
    for (int j = 2; j < 15; ++j) CHECK(b.bsums[j] == 0);
    CHECK(b.bsums[15] == -100);

    // A positive maximum flips the sign: x[0] = 63.5 gives iscale = -2, d = -0.5.
    std::vector<float> y(QK_K, 0.0f);
    y[0] = 63.5f;
    y[1] = -10.25f;  // -2 * -10.25 = 20.5: tie, rounds to even 20
    y[2] = 0.75f;    // -1.5: tie, rounds to even -2
    quantize_row_q8_k(y.data(), &b, QK_K);
    CHECK(b.d == -0.5f);
    CHECK(int(b.qs[0]) == -127);
    CHECK(int(b.qs[1]) == 20);
    CHECK(int(b.qs[2]) == -2);
    CHECK(b.bsums[0] == -109);
}

TEST_CASE("Q8_K quantization of an all-zero block is d = 0, q = 0") {
    std::vector<float> x(2 * QK_K, 0.0f);
    x[QK_K + 3] = 1.0f;  // second block non-zero
    BlockQ8K b[2];
    std::memset(b, 0x55, sizeof(b));
    quantize_row_q8_k(x.data(), b, 2 * QK_K);
    CHECK(b[0].d == 0.0f);
    for (int i = 0; i < QK_K; ++i) REQUIRE(b[0].qs[i] == 0);
    for (int j = 0; j < QK_K / 16; ++j) REQUIRE(b[0].bsums[j] == 0);
    CHECK(b[1].d == doctest::Approx(-1.0f / 127.0f));
    CHECK(int(b[1].qs[3]) == -127);
    CHECK_THROWS_AS(quantize_row_q8_k(x.data(), b, 100), smol::Error);
}

TEST_CASE("Q8_K bsums are the sums of each 16 quants on random data") {
    const auto x = gaussian(4 * QK_K, 7);
    BlockQ8K b[4];
    quantize_row_q8_k(x.data(), b, 4 * QK_K);
    for (const auto& block : b) {
        for (int j = 0; j < 16; ++j) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += block.qs[16 * j + l];
            REQUIRE(block.bsums[j] == s);
        }
        for (int i = 0; i < QK_K; ++i) REQUIRE(std::abs(int(block.qs[i])) <= 127);
    }
}

// ---------------------------------------------------------------------------------------------
// Q4_K dequantization of a hand-built block

namespace {

// The header Q4_K and Q5_K blocks share, hand-built: d = 1 (fp16 0x3c00), dmin = 0.5 (0x3800),
// sub-block scales and mins
//   sc = {1, 2, 3, 4, 33, 40, 63, 17},  m = {0, 1, 2, 3, 5, 63, 32, 48}
// Packing (bytes 0-3: sc[0..3] | (sc[4..7] >> 4) << 6; bytes 4-7: m[0..3] | (m[4..7] >> 4) << 6;
// bytes 8-11: (sc[4..7] & 15) | (m[4..7] & 15) << 4):
//   sc[4..7] >> 4 = 2, 2, 3, 1;  sc[4..7] & 15 = 1, 8, 15, 1
//   m[4..7]  >> 4 = 0, 3, 2, 3;  m[4..7]  & 15 = 5, 15, 0, 0
//   s[0] = 1|2<<6 = 0x81, s[1] = 2|2<<6 = 0x82, s[2] = 3|3<<6 = 0xc3, s[3] = 4|1<<6 = 0x44
//   s[4] = 0|0<<6 = 0x00, s[5] = 1|3<<6 = 0xc1, s[6] = 2|2<<6 = 0x82, s[7] = 3|3<<6 = 0xc3
//   s[8] = 1|5<<4 = 0x51, s[9] = 8|15<<4 = 0xf8, s[10] = 15|0 = 0x0f, s[11] = 1|0 = 0x01
// and the low nibbles qs[i]: low nibble i % 16, high nibble 15 - i % 16.
constexpr int kHandScales[8] = {1, 2, 3, 4, 33, 40, 63, 17};
constexpr int kHandMins[8] = {0, 1, 2, 3, 5, 63, 32, 48};

template <class Block>
void fill_hand_built_header(Block& b) {
    b.d = 0x3c00;
    b.dmin = 0x3800;
    const std::uint8_t packed[12] = {0x81, 0x82, 0xc3, 0x44, 0x00, 0xc1, 0x82, 0xc3, 0x51, 0xf8, 0x0f, 0x01};
    std::memcpy(b.scales, packed, 12);
    for (int i = 0; i < 128; ++i) b.qs[i] = std::uint8_t((i % 16) | ((15 - i % 16) << 4));
}

}  // namespace

TEST_CASE("Q4_K dequantization of a hand-built block") {
    BlockQ4K b;
    fill_hand_built_header(b);
    const int(&sc)[8] = kHandScales;
    const int(&m)[8] = kHandMins;
    for (int j = 0; j < 8; ++j) {
        std::uint8_t s, mm;
        q4k_scale_min(j, b.scales, s, mm);
        CHECK(int(s) == sc[j]);
        CHECK(int(mm) == m[j]);
    }
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q4_K, &b, w.data(), QK_K);
    // Weight 64c + l (l < 32) is the low nibble of qs[32c + l] in sub-block 2c; weight
    // 64c + 32 + l its high nibble in sub-block 2c + 1.
    CHECK(w[0] == 0.0f);                   // 1*1*0 - 0.5*0
    CHECK(w[5] == 5.0f);                   // 1*1*5 - 0.5*0
    CHECK(w[32 + 3] == 23.5f);             // 1*2*(15-3) - 0.5*1
    CHECK(w[128 + 7] == 228.5f);           // 1*33*7 - 0.5*5
    CHECK(w[128 + 32] == 568.5f);          // 1*40*15 - 0.5*63
    CHECK(w[192 + 15] == 929.0f);          // 1*63*15 - 0.5*32
    CHECK(w[255] == -24.0f);               // 1*17*(15-15) - 0.5*48
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            REQUIRE(w[64 * c + l] == float(sc[2 * c] * (l % 16)) - 0.5f * float(m[2 * c]));
            REQUIRE(w[64 * c + 32 + l] == float(sc[2 * c + 1] * (15 - l % 16)) - 0.5f * float(m[2 * c + 1]));
        }
}

TEST_CASE("Q4_K word-wide scale unpacking agrees with the per-index formula") {
    std::mt19937 rng(42);
    for (int trial = 0; trial < 20000; ++trial) {
        std::uint8_t packed[12], unpacked[16];
        for (auto& b : packed) b = std::uint8_t(rng());
        q4k_unpack_scales_mins(packed, unpacked);
        for (int j = 0; j < 8; ++j) {
            std::uint8_t sc, m;
            q4k_scale_min(j, packed, sc, m);
            REQUIRE(unpacked[j] == sc);
            REQUIRE(unpacked[8 + j] == m);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Q2_K dequantization of a hand-built block

TEST_CASE("Q2_K dequantization of a hand-built block") {
    // d = 0.5, dmin = 0.25; sub-block j has scale j (low nibble) and min 15 - j (high nibble).
    // Weight 32k + l is bit pair 2 (k % 4) of qs[32 (k / 4) + l], with qs[i] = 29 i + 7.
    BlockQ2K b;
    b.d = 0x3800;
    b.dmin = 0x3400;
    for (int j = 0; j < 16; ++j) b.scales[j] = std::uint8_t(j | (15 - j) << 4);
    for (int i = 0; i < 64; ++i) b.qs[i] = std::uint8_t(29 * i + 7);
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q2_K, &b, w.data(), QK_K);
    CHECK(w[0] == -3.75f);   // qs[0] = 7: pair 0 is 3; 0.5 * 0 * 3 - 0.25 * 15
    CHECK(w[17] == -3.5f);   // qs[17] = 244: pair 0 is 0; - 0.25 * 14
    CHECK(w[201] == 11.25f); // chunk 6: qs[41] = 172, pair 2 is 2; 0.5 * 12 * 2 - 0.25 * 3
    CHECK(w[225] == 20.75f); // chunk 7: qs[33] = 196, pair 3 is 3; 0.5 * 14 * 3 - 0.25 * 1
    CHECK(w[240] == 7.5f);   // chunk 7: qs[48] = 119, pair 3 is 1; 0.5 * 15 * 1 - 0.25 * 0
    for (int i = 0; i < QK_K; ++i) {
        const int k = i / 32, j = i / 16;
        const int q = (b.qs[32 * (k / 4) + i % 32] >> (2 * (k % 4))) & 3;
        REQUIRE(w[i] == 0.5f * float(j) * float(q) - 0.25f * float(15 - j));
    }
}

// ---------------------------------------------------------------------------------------------
// Q3_K dequantization of a hand-built block

TEST_CASE("Q3_K dequantization of a hand-built block") {
    // Scales j - 8 for sub-block j (stored + 32: 24..39). Bytes 0-7 hold the low four bits of
    // scale j (low nibble, 8 + j) and of scale j + 8 (high nibble, j); every top-bits byte 8 + i
    // holds 1 (scales i, i + 4) and 2 (scales i + 8, i + 12): 1 | 1 << 2 | 2 << 4 | 2 << 6 = 0xa5.
    BlockQ3K b;
    b.d = 0x3800;  // 0.5
    const std::uint8_t packed[12] = {0x08, 0x19, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f, 0xa5, 0xa5, 0xa5, 0xa5};
    std::memcpy(b.scales, packed, 12);
    std::int8_t scales[16];
    q3k_unpack_scales(b.scales, scales);
    for (int j = 0; j < 16; ++j) CHECK(int(scales[j]) == j - 8);
    // Weight 32k + l: bit pair 2 (k % 4) of qs[32 (k / 4) + l] minus 4 unless bit k of hmask[l].
    for (int i = 0; i < 64; ++i) b.qs[i] = std::uint8_t(29 * i + 7);
    for (int l = 0; l < 32; ++l) b.hmask[l] = std::uint8_t(13 * l + 5);
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q3_K, &b, w.data(), QK_K);
    CHECK(w[0] == -12.0f);   // qs[0] = 7: pair 0 is 3; hmask[0] = 0b101: bit 0 set; 0.5 * -8 * 3
    CHECK(w[1] == 16.0f);    // qs[1] = 36: pair 0 is 0; hmask[1] = 0b10010: bit 0 clear, q = -4; 0.5 * -8 * -4
    CHECK(w[17] == 14.0f);   // qs[17] = 244: 0; hmask[17] = 226: bit 0 clear, q = -4; 0.5 * -7 * -4
    CHECK(w[201] == 4.0f);   // chunk 6: qs[41] = 172, pair 2 is 2; hmask[9] = 122: bit 6 set; 0.5 * 4 * 2
    CHECK(w[225] == -3.0f);  // chunk 7: qs[33] = 196, pair 3 is 3; hmask[1]: bit 7 clear, q = -1; 0.5 * 6 * -1
    CHECK(w[240] == 3.5f);   // chunk 7: qs[48] = 119, pair 3 is 1; hmask[16] = 213: bit 7 set; 0.5 * 7 * 1
    for (int i = 0; i < QK_K; ++i) {
        const int k = i / 32, l = i % 32;
        const int q = ((b.qs[32 * (k / 4) + l] >> (2 * (k % 4))) & 3) - ((b.hmask[l] >> k) & 1 ? 0 : 4);
        REQUIRE(w[i] == 0.5f * float(i / 16 - 8) * float(q));
    }
}

TEST_CASE("Q3_K word-wide scale unpacking agrees with the per-index formula") {
    std::mt19937 rng(43);
    for (int trial = 0; trial < 20000; ++trial) {
        std::uint8_t packed[12];
        std::int8_t unpacked[16];
        for (auto& b : packed) b = std::uint8_t(rng());
        q3k_unpack_scales(packed, unpacked);
        for (int j = 0; j < 16; ++j) {
            const int low = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
            const int top = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
            REQUIRE(int(unpacked[j]) == (low | top << 4) - 32);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Q5_K dequantization of a hand-built block

TEST_CASE("Q5_K dequantization of a hand-built block") {
    // The Q4_K case's header (d = 1, dmin = 0.5, the same packed scales and mins) and low nibbles
    // (qs[i]: low i % 16, high 15 - i % 16), with qh[l] = 7 l + 3: the fifth bit of weight
    // 64c + l is bit 2c of qh[l], that of weight 64c + 32 + l bit 2c + 1.
    BlockQ5K b;
    fill_hand_built_header(b);
    for (int l = 0; l < 32; ++l) b.qh[l] = std::uint8_t(7 * l + 3);
    const int(&sc)[8] = kHandScales;
    const int(&m)[8] = kHandMins;
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q5_K, &b, w.data(), QK_K);
    CHECK(w[0] == 16.0f);             // qh[0] = 0b11: bit 0 set, q = 0 + 16; 1*16 - 0.5*0
    CHECK(w[1] == 1.0f);              // qh[1] = 0b1010: bit 0 clear, q = 1
    CHECK(w[32 + 3] == 23.5f);        // qh[3] = 0b11000: bit 1 clear, q = 12; 2*12 - 0.5*1
    CHECK(w[96 + 3] == 110.5f);       // bit 3 set, q = 12 + 16; 4*28 - 0.5*3
    CHECK(w[128 + 7] == 756.5f);      // qh[7] = 0b110100: bit 4 set, q = 7 + 16; 33*23 - 0.5*5
    CHECK(w[192 + 31] == 1937.0f);    // qh[31] = 0b11011100: bit 6 set, q = 15 + 16; 63*31 - 0.5*32
    CHECK(w[255] == 248.0f);          // bit 7 set, q = 0 + 16; 17*16 - 0.5*48
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const int q_low = l % 16 + 16 * ((b.qh[l] >> (2 * c)) & 1);
            const int q_high = 15 - l % 16 + 16 * ((b.qh[l] >> (2 * c + 1)) & 1);
            REQUIRE(w[64 * c + l] == float(sc[2 * c] * q_low) - 0.5f * float(m[2 * c]));
            REQUIRE(w[64 * c + 32 + l] == float(sc[2 * c + 1] * q_high) - 0.5f * float(m[2 * c + 1]));
        }
}

// ---------------------------------------------------------------------------------------------
// Q6_K dequantization of a hand-built block

TEST_CASE("Q6_K dequantization of a hand-built block") {
    // Quant of weight i: q[i] = (7 i) mod 64 (stored, 0..63; the weight uses q - 32).
    // d = 0.25 (fp16 0x3400); scales = 1, -2, 3, -4, ..., 15, -16 (scale s covers weights 16s..16s+15).
    int q[QK_K];
    for (int i = 0; i < QK_K; ++i) q[i] = (7 * i) % 64;
    BlockQ6K b;
    b.d = 0x3400;
    for (int s = 0; s < 16; ++s) b.scales[s] = std::int8_t(s % 2 == 0 ? s + 1 : -(s + 1));
    // Packing per the format: in half h, position l < 32 of ql holds weights l (low nibble) and
    // l+64 (high nibble); ql[l+32] holds l+32 and l+96; qh[l] holds the top 2 bits of l, l+32,
    // l+64, l+96 at bit 0, 2, 4, 6.
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int* Q = q + 128 * h;
            b.ql[64 * h + l] = std::uint8_t((Q[l] & 15) | ((Q[l + 64] & 15) << 4));
            b.ql[64 * h + l + 32] = std::uint8_t((Q[l + 32] & 15) | ((Q[l + 96] & 15) << 4));
            b.qh[32 * h + l] = std::uint8_t((Q[l] >> 4) | ((Q[l + 32] >> 4) << 2) | ((Q[l + 64] >> 4) << 4) |
                                            ((Q[l + 96] >> 4) << 6));
        }
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q6_K, &b, w.data(), QK_K);
    CHECK(w[0] == -8.0f);     // q 0: 0.25 * 1 * (0 - 32)
    CHECK(w[17] == -11.5f);   // q 119 mod 64 = 55: 0.25 * -2 * 23
    CHECK(w[200] == 78.0f);   // q 1400 mod 64 = 56: 0.25 * 13 * 24
    CHECK(w[255] == -100.0f); // q 1785 mod 64 = 57: 0.25 * -16 * 25
    for (int i = 0; i < QK_K; ++i) REQUIRE(w[i] == 0.25f * float(b.scales[i / 16]) * float(q[i] - 32));
}

TEST_CASE("Q8_0, F16, BF16 and F32 dequantization; unsupported types throw") {
    BlockQ8_0 b;
    b.d = 0x3800;  // 0.5
    for (int i = 0; i < 32; ++i) b.qs[i] = std::int8_t(i - 16);
    float w[32];
    dequantize_row(TensorType::Q8_0, &b, w, 32);
    for (int i = 0; i < 32; ++i) REQUIRE(w[i] == 0.5f * float(i - 16));

    const std::uint16_t halves[3] = {0x3c00, 0xc000, 0x3555};  // 1, -2, 0.333251953125
    dequantize_row(TensorType::F16, halves, w, 3);
    CHECK(w[0] == 1.0f);
    CHECK(w[1] == -2.0f);
    CHECK(w[2] == 0.333251953125f);
    const std::uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
    dequantize_row(TensorType::BF16, bf, w, 2);
    CHECK(w[0] == 1.0f);
    CHECK(w[1] == -3.0f);
    const float f[2] = {1.5f, -7.0f};
    dequantize_row(TensorType::F32, f, w, 2);
    CHECK(w[0] == 1.5f);
    CHECK(w[1] == -7.0f);

    CHECK_THROWS_AS(dequantize_row(TensorType::IQ2_XXS, &b, w, 256), smol::Error);
    CHECK_THROWS_AS(dequantize_row(TensorType::Q4_K, &b, w, 100), smol::Error);
}

TEST_CASE("Q4_0 dequantization of a hand-built block: byte l holds values l and l + 16") {
    BlockQ4_0 b;
    b.d = 0xb800;  // -0.5
    for (int l = 0; l < 16; ++l) b.qs[l] = std::uint8_t(l | ((15 - l) << 4));
    float w[64];
    BlockQ4_0 two[2] = {b, b};
    two[1].d = 0x4000;  // 2
    dequantize_row(TensorType::Q4_0, two, w, 64);
    for (int l = 0; l < 16; ++l) {
        REQUIRE(w[l] == -0.5f * float(l - 8));
        REQUIRE(w[l + 16] == -0.5f * float(7 - l));
        REQUIRE(w[32 + l] == 2.0f * float(l - 8));
    }
}

TEST_CASE("Q5_0 dequantization of a hand-built block: bit l of qh is bit 4 of value l") {
    BlockQ5_0 b;
    b.d = 0x3800;  // 0.5
    for (int l = 0; l < 16; ++l) b.qs[l] = std::uint8_t(l | ((15 - l) << 4));
    const std::uint32_t qh = 0xa5c3'0f01u;  // little-endian, as ggml stores it
    std::memcpy(b.qh, &qh, sizeof(qh));
    float w[32];
    dequantize_row(TensorType::Q5_0, &b, w, 32);
    for (int l = 0; l < 16; ++l) {
        const int high_lo = (qh >> l) & 1, high_hi = (qh >> (l + 16)) & 1;
        INFO("l = " << l);
        REQUIRE(w[l] == 0.5f * float((l | high_lo << 4) - 16));
        REQUIRE(w[l + 16] == 0.5f * float(((15 - l) | high_hi << 4) - 16));
    }
    CHECK(w[0] == 0.5f * (16 - 16));   // qh bit 0 set, nibble 0
    CHECK(w[1] == 0.5f * (1 - 16));    // bit 1 clear
    CHECK(w[31] == 0.5f * (16 - 16));  // bit 31 set, nibble 15 - 15
}

TEST_CASE("Q4_1 dequantization of a hand-built block: d * q + m") {
    BlockQ4_1 b;
    b.d = 0x3400;  // 0.25
    b.m = 0xc100;  // -2.5
    for (int l = 0; l < 16; ++l) b.qs[l] = std::uint8_t(l | ((15 - l) << 4));
    float w[32];
    dequantize_row(TensorType::Q4_1, &b, w, 32);
    for (int l = 0; l < 16; ++l) {
        REQUIRE(w[l] == 0.25f * float(l) - 2.5f);
        REQUIRE(w[l + 16] == 0.25f * float(15 - l) - 2.5f);
    }
}

// ---------------------------------------------------------------------------------------------
// Against ggml: tests/data/tiny-quants holds llama.cpp-quantized files and ggml's own
// dequantization of one tensor of each (README.md there says how they were made).

TEST_CASE("Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL and IQ4_XS dequantization equals ggml's, bit for bit, on llama.cpp-quantized tensors") {
    for (const TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_1,
                                  TensorType::IQ4_NL, TensorType::IQ4_XS}) {
        const std::string name(type_name(type));
        CAPTURE(name);
        const std::string dir = SMOL_TEST_DATA_DIR "/tiny-quants/";
        const auto file = gguf::File::open(dir + "smollm3-tiny-" + name + ".gguf");
        const gguf::TensorInfo& t = file.tensor("blk.0.attn_k.weight");
        REQUIRE(t.type == type);
        REQUIRE(t.shape == std::vector<std::int64_t>{256, 128});  // [columns, rows]
        const std::int64_t rows = 128, cols = 256;
        std::vector<float> expected(std::size_t(rows * cols));
        std::ifstream in(dir + name + "/blk.0.attn_k.dequant.f32", std::ios::binary);
        REQUIRE(in.read(reinterpret_cast<char*>(expected.data()), std::streamsize(expected.size() * sizeof(float))));
        std::vector<float> row(static_cast<std::size_t>(cols));
        int differing = 0, nonzero = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
            dequantize_row(type, t.data + std::size_t(r) * t.row_bytes(), row.data(), cols);
            for (std::int64_t c = 0; c < cols; ++c) {
                const float want = expected[std::size_t(r * cols + c)];
                nonzero += want != 0.0f;
                if (std::bit_cast<std::uint32_t>(row[std::size_t(c)]) != std::bit_cast<std::uint32_t>(want) &&
                    differing++ < 5)
                    MESSAGE("row ", r, " column ", c, ": smol ", row[std::size_t(c)], ", ggml ", want);
            }
        }
        CHECK(differing == 0);
        CHECK(nonzero > rows * cols / 2);  // real weights, not an empty file
    }
}

// ---------------------------------------------------------------------------------------------
// Against ggml: tests/data/tiny-quants holds llama.cpp-quantized files and ggml's own
// dequantization of one tensor of each (README.md there says how they were made).

TEST_CASE("k-quant dequantization equals ggml's, bit for bit, on llama.cpp-quantized tensors") {
    for (const TensorType type : {TensorType::Q5_K, TensorType::Q3_K, TensorType::Q2_K}) {
        const std::string name(type_name(type));
        CAPTURE(name);
        const std::string dir = SMOL_TEST_DATA_DIR "/tiny-quants/";
        const auto file = gguf::File::open(dir + "smollm3-tiny-" + name + ".gguf");
        const gguf::TensorInfo& t = file.tensor("blk.0.attn_k.weight");
        REQUIRE(t.type == type);
        REQUIRE(t.shape == std::vector<std::int64_t>{256, 128});  // [columns, rows]
        const std::int64_t rows = 128, cols = 256;
        std::vector<float> expected(std::size_t(rows * cols));
        std::ifstream in(dir + name + "/blk.0.attn_k.dequant.f32", std::ios::binary);
        REQUIRE(in.read(reinterpret_cast<char*>(expected.data()), std::streamsize(expected.size() * sizeof(float))));
        std::vector<float> row(static_cast<std::size_t>(cols));
        int differing = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
            dequantize_row(type, t.data + std::size_t(r) * t.row_bytes(), row.data(), cols);
            for (std::int64_t c = 0; c < cols; ++c) {
                const float want = expected[std::size_t(r * cols + c)];
                if (std::bit_cast<std::uint32_t>(row[std::size_t(c)]) != std::bit_cast<std::uint32_t>(want)) {
                    if (differing++ < 5) MESSAGE("row ", r, " column ", c, ": smol ", row[std::size_t(c)], ", ggml ", want);
                }
            }
        }
        CHECK(differing == 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Weight quantizers

namespace {

// Q4_K and Q5_K share their 6-bit scales and mins and their quantizer's fit. With `levels` quant
// values (16 or 32), even sub-blocks hold 0..levels-1 and odd ones -levels/2..levels/2-1:
// make_qkx2_quants fits both with error 0, scale 1 and min 0 (even) or levels/2 (odd). Then
// max_scale = 1 and max_min = levels/2, every 6-bit scale is 63, every odd min 63, every even
// min 0, and
//   d    = fp16(1/63)          = 2^-6 * (1 + 16/1024) = 0.015869140625  -> d * 63 = 0.999755859375
//   dmin = fp16(levels/2 / 63) = 2^-6 * (1 + 16/1024) * levels/2        -> dmin * 63
// and the quants requantized against those are q = x (even) and q = x + levels/2 (odd).
template <class Block>
void check_scale_min_round_trip(TensorType type, void (*quantize)(const float*, Block*, std::int64_t), int levels,
                                float expected_dmin, float expected_dmin_63) {
    CAPTURE(type_name(type));
    const int half = levels / 2;
    std::vector<float> x(QK_K);
    for (int i = 0; i < QK_K; ++i) x[i] = float(i % levels) - ((i / 32) % 2 == 1 ? float(half) : 0.0f);
    Block b;
    quantize(x.data(), &b, QK_K);
    CHECK(fp16_to_f32(b.d) == 0.015869140625f);
    CHECK(fp16_to_f32(b.dmin) == expected_dmin);
    for (int j = 0; j < 8; ++j) {
        std::uint8_t sc, m;
        q4k_scale_min(j, b.scales, sc, m);
        CHECK(int(sc) == 63);
        CHECK(int(m) == (j % 2 == 1 ? 63 : 0));
    }
    std::vector<float> w(QK_K);
    dequantize_row(type, &b, w.data(), QK_K);
    for (int i = 0; i < QK_K; ++i) {
        const bool odd = (i / 32) % 2 == 1;
        const float q = float(i % levels);
        REQUIRE(w[i] == (odd ? 0.999755859375f * q - expected_dmin_63 : 0.999755859375f * q));
    }
}

}  // namespace

TEST_CASE("Q4_K quantizer: hand-made input round-trips to hand-checked values") {
    // dmin = fp16(8/63) = 2^-3 * (1 + 16/1024) = 0.126953125 -> dmin * 63 = 7.998046875
    check_scale_min_round_trip<BlockQ4K>(TensorType::Q4_K, quantize_row_q4_k, 16, 0.126953125f, 7.998046875f);
}

TEST_CASE("Q2_K quantizer: hand-made input round-trips exactly") {
    // Sub-block j holds 15 (q - o) with q = (3 i + j) % 4 (all of 0..3) and offset o = j % 4:
    // make_qkx2_quants fits scale 15 and min -15 o up to float rounding, so the largest scale
    // maps to 15 with d = fp16(15 / 15) = 1, the largest min (45) to 15 with dmin = fp16(3) = 3,
    // the 4-bit mins are 5 o, and every weight comes back exactly.
    std::vector<float> x(QK_K);
    for (int i = 0; i < QK_K; ++i) {
        const int j = i / 16, q = (3 * i + j) % 4;
        x[i] = 15.0f * float(q - j % 4);
    }
    BlockQ2K b;
    quantize_row_q2_k(x.data(), &b, QK_K);
    CHECK(fp16_to_f32(b.d) == 1.0f);
    CHECK(fp16_to_f32(b.dmin) == 3.0f);
    for (int j = 0; j < 16; ++j) {
        CHECK(int(b.scales[j] & 0x0f) == 15);
        CHECK(int(b.scales[j] >> 4) == 5 * (j % 4));
    }
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q2_K, &b, w.data(), QK_K);
    for (int i = 0; i < QK_K; ++i) REQUIRE(w[i] == x[i]);
}

TEST_CASE("Q3_K quantizer: hand-made input round-trips exactly") {
    // Sub-block j holds s * q with s = j % 4 + 1 and q in -4..3, q = -4 first: make_q3_quants
    // fits each with scale s exactly (its sums are small integers), the largest, 4, maps to -32,
    // so d = fp16(4 / -32) = -0.125 exactly and the 6-bit scales are -8 s: d * scale = s.
    std::vector<float> x(QK_K);
    for (int i = 0; i < QK_K; ++i) {
        const int q = i % 16 == 0 ? -4 : (i * 5) % 8 - 4;
        x[i] = float((i / 16) % 4 + 1) * float(q);
    }
    BlockQ3K b;
    quantize_row_q3_k(x.data(), &b, QK_K);
    CHECK(fp16_to_f32(b.d) == -0.125f);
    std::int8_t scales[16];
    q3k_unpack_scales(b.scales, scales);
    for (int j = 0; j < 16; ++j) CHECK(int(scales[j]) == -8 * (j % 4 + 1));
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q3_K, &b, w.data(), QK_K);
    for (int i = 0; i < QK_K; ++i) REQUIRE(w[i] == x[i]);
}

TEST_CASE("Q5_K quantizer: hand-made input round-trips to hand-checked values") {
    // dmin = fp16(16/63) = 2^-2 * (1 + 16/1024) = 0.25390625 -> dmin * 63 = 15.99609375; half of
    // the quants need the fifth bit.
    check_scale_min_round_trip<BlockQ5K>(TensorType::Q5_K, quantize_row_q5_k, 32, 0.25390625f, 15.99609375f);
}

TEST_CASE("Q6_K quantizer: hand-made input round-trips exactly") {
    // Every sub-block of 16 holds -32 (the largest magnitude) and integers in [-31, 31]:
    // make_qx_quants gives scale 1 for each, so max_scale = 1, iscale = -128, d = fp16(-1/128)
    // = 0xa000 exactly, every 8-bit scale is -128 and d * scale = 1: integers come back exactly.
    std::vector<float> x(QK_K);
    for (int i = 0; i < QK_K; ++i) x[i] = i % 16 == 0 ? -32.0f : float((i * 5) % 63 - 31);
    BlockQ6K b;
    quantize_row_q6_k(x.data(), &b, QK_K);
    CHECK(b.d == 0xa000);
    for (int s = 0; s < 16; ++s) CHECK(int(b.scales[s]) == -128);
    std::vector<float> w(QK_K);
    dequantize_row(TensorType::Q6_K, &b, w.data(), QK_K);
    for (int i = 0; i < QK_K; ++i) REQUIRE(w[i] == x[i]);
}

TEST_CASE("quantizers: zero rows give zero blocks") {
    std::vector<float> x(QK_K, 0.0f), w(QK_K, 1.0f);
    BlockQ4K q4;
    quantize_row_q4_k(x.data(), &q4, QK_K);
    dequantize_row(TensorType::Q4_K, &q4, w.data(), QK_K);
    for (float v : w) REQUIRE(v == 0.0f);
    BlockQ6K q6;
    quantize_row_q6_k(x.data(), &q6, QK_K);
    dequantize_row(TensorType::Q6_K, &q6, w.data(), QK_K);
    for (float v : w) REQUIRE(v == 0.0f);
    BlockQ5K q5;
    quantize_row_q5_k(x.data(), &q5, QK_K);
    dequantize_row(TensorType::Q5_K, &q5, w.data(), QK_K);
    for (float v : w) REQUIRE(v == 0.0f);
    BlockQ3K q3;
    quantize_row_q3_k(x.data(), &q3, QK_K);
    dequantize_row(TensorType::Q3_K, &q3, w.data(), QK_K);
    for (float v : w) REQUIRE(v == 0.0f);
    BlockQ2K q2;
    quantize_row_q2_k(x.data(), &q2, QK_K);
    dequantize_row(TensorType::Q2_K, &q2, w.data(), QK_K);
    for (float v : w) REQUIRE(v == 0.0f);
}

// Measured on these rows (16 rows of 4096 gaussian values, sigma 0.02 to 7.5), worst row:
// Q2_K 0.304, Q3_K 0.155, Q4_K 0.0732, Q5_K 0.0367, Q6_K 0.0184, Q8_0 0.0055, Q4_0 0.0887, Q5_0
// 0.0439, Q4_1 0.0802 (RMSE / RMS). The bounds leave ~10% headroom; a broken fit or a wrong bit
// layout lands far above them.
TEST_CASE("quantize then dequantize gaussian rows: RMSE relative to row RMS") {
    const std::int64_t n = 4096;
    struct Case {
        TensorType type;
        double bound;
    };
    for (const Case c : {Case{TensorType::Q2_K, 0.33}, Case{TensorType::Q3_K, 0.17}, Case{TensorType::Q4_K, 0.080},
                         Case{TensorType::Q5_K, 0.040}, Case{TensorType::Q6_K, 0.020}, Case{TensorType::Q8_0, 0.0061},
                         Case{TensorType::Q4_0, 0.098}, Case{TensorType::Q5_0, 0.048}, Case{TensorType::Q4_1, 0.088}}) {
        double worst = 0, total = 0;
        for (std::uint32_t row = 0; row < 16; ++row) {
            const auto x = gaussian(std::size_t(n), 100 + row, 0.02f + 0.5f * float(row));
            const auto traits = traits_of(c.type);
            std::vector<std::uint8_t> q(std::size_t(n) / traits.block_elements * traits.block_bytes);
            quantize_row(c.type, x.data(), q.data(), n);
            std::vector<float> back(static_cast<std::size_t>(n));
            dequantize_row(c.type, q.data(), back.data(), n);
            const double rel = rmse(x, back) / rms(x);
            worst = std::max(worst, rel);
            total += rel;
        }
        MESSAGE(type_name(c.type), ": relative RMSE mean ", total / 16, ", worst ", worst, " (bound ", c.bound, ")");
        CHECK(worst < c.bound);
        CHECK(worst > c.bound * 0.5);  // a quantizer far better than its bits allow is a broken test
    }
}

// ---------------------------------------------------------------------------------------------
// Reference dot products against dequantize-then-multiply (in double)

namespace {

template <class Block>
double dequant_dot(TensorType type, const std::vector<Block>& w, const std::vector<BlockQ8K>& a, std::int64_t n) {
    std::vector<float> wf(std::size_t(n), 0.0f);
    dequantize_row(type, w.data(), wf.data(), n);
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i)
        s += double(wf[std::size_t(i)]) * double(a[std::size_t(i / QK_K)].d) * a[std::size_t(i / QK_K)].qs[i % QK_K];
    return s;
}

}  // namespace

TEST_CASE("reference dot products equal dequantize-then-multiply") {
    const std::int64_t n = 2048;
    const auto wx = gaussian(std::size_t(n), 11);
    const auto ax = gaussian(std::size_t(n), 12);
    std::vector<BlockQ8K> a(std::size_t(n / QK_K));
    quantize_row_q8_k(ax.data(), a.data(), n);

    std::vector<BlockQ4K> w4(std::size_t(n / QK_K));
    quantize_row_q4_k(wx.data(), w4.data(), n);
    const double e4 = dequant_dot(TensorType::Q4_K, w4, a, n);
    CHECK(dot_q4k_q8k(n, w4.data(), a.data()) == doctest::Approx(e4).epsilon(1e-5));

    std::vector<BlockQ2K> w2(std::size_t(n / QK_K));
    quantize_row_q2_k(wx.data(), w2.data(), n);
    const double e2 = dequant_dot(TensorType::Q2_K, w2, a, n);
    CHECK(dot_q2k_q8k(n, w2.data(), a.data()) == doctest::Approx(e2).epsilon(1e-5));

    std::vector<BlockQ3K> w3(std::size_t(n / QK_K));
    quantize_row_q3_k(wx.data(), w3.data(), n);
    const double e3 = dequant_dot(TensorType::Q3_K, w3, a, n);
    CHECK(dot_q3k_q8k(n, w3.data(), a.data()) == doctest::Approx(e3).epsilon(1e-5));

    std::vector<BlockQ5K> w5(std::size_t(n / QK_K));
    quantize_row_q5_k(wx.data(), w5.data(), n);
    const double e5 = dequant_dot(TensorType::Q5_K, w5, a, n);
    CHECK(dot_q5k_q8k(n, w5.data(), a.data()) == doctest::Approx(e5).epsilon(1e-5));

    std::vector<BlockQ6K> w6(std::size_t(n / QK_K));
    quantize_row_q6_k(wx.data(), w6.data(), n);
    const double e6 = dequant_dot(TensorType::Q6_K, w6, a, n);
    CHECK(dot_q6k_q8k(n, w6.data(), a.data()) == doctest::Approx(e6).epsilon(1e-5));

    std::vector<BlockQ8_0> w8(std::size_t(n / QK8_0)), a8(std::size_t(n / QK8_0));
    quantize_row_q8_0(wx.data(), w8.data(), n);
    quantize_row_q8_0(ax.data(), a8.data(), n);
    std::vector<float> wf(static_cast<std::size_t>(n)), af(static_cast<std::size_t>(n));
    dequantize_row(TensorType::Q8_0, w8.data(), wf.data(), n);
    dequantize_row(TensorType::Q8_0, a8.data(), af.data(), n);
    double e8 = 0;
    for (std::int64_t i = 0; i < n; ++i) e8 += double(wf[std::size_t(i)]) * af[std::size_t(i)];
    CHECK(dot_q8_0_q8_0(n, w8.data(), a8.data()) == doctest::Approx(e8).epsilon(1e-5));

    // Quantized dot products approximate the float one (the quantization error, not rounding).
    double exact = 0;
    for (std::int64_t i = 0; i < n; ++i) exact += double(wx[std::size_t(i)]) * ax[std::size_t(i)];
    // Per-weight errors of RMS ~0.09 (Q4_K) and ~0.02 (Q6_K) give sums with sigma ~0.09 sqrt(n)
    // and ~0.02 sqrt(n); the bounds are 4 sigma, a sign or layout error is ~sqrt(n) off.
    CHECK(std::abs(e4 - exact) < 0.36 * std::sqrt(double(n)));
    CHECK(std::abs(e6 - exact) < 0.08 * std::sqrt(double(n)));
    CHECK(std::abs(e5 - exact) < 0.18 * std::sqrt(double(n)));  // per-weight error RMS ~0.04
    CHECK(std::abs(e3 - exact) < 0.62 * std::sqrt(double(n)));  // ~0.155
    CHECK(std::abs(e2 - exact) < 1.22 * std::sqrt(double(n)));  // ~0.304
}

namespace {

// Weights of a block-of-32 format against Q8_0 activations, dequantized and multiplied in double.
template <class Block>
double dequant_dot(TensorType type, const std::vector<Block>& w, const std::vector<BlockQ8_0>& a, std::int64_t n) {
    std::vector<float> wf(static_cast<std::size_t>(n)), af(static_cast<std::size_t>(n));
    dequantize_row(type, w.data(), wf.data(), n);
    dequantize_row(TensorType::Q8_0, a.data(), af.data(), n);
    double s = 0;
    for (std::size_t i = 0; i < wf.size(); ++i) s += double(wf[i]) * af[i];
    return s;
}

}  // namespace

TEST_CASE("block-of-32 reference dot products equal dequantize-then-multiply") {
    const std::int64_t n = 2048;
    const auto wx = gaussian(std::size_t(n), 13);
    const auto ax = gaussian(std::size_t(n), 14);
    std::vector<BlockQ8_0> a(std::size_t(n / QK8_0));
    quantize_row_q8_0(ax.data(), a.data(), n);
    double exact = 0;
    for (std::int64_t i = 0; i < n; ++i) exact += double(wx[std::size_t(i)]) * ax[std::size_t(i)];

    std::vector<BlockQ4_0> w40(std::size_t(n / QK4_0));
    quantize_row(TensorType::Q4_0, wx.data(), w40.data(), n);
    const double e40 = dequant_dot(TensorType::Q4_0, w40, a, n);
    CHECK(dot_q4_0_q8_0(n, w40.data(), a.data()) == doctest::Approx(e40).epsilon(1e-5));
    // Per-weight errors of RMS ~0.09 of the weights' (sigma 1) give sums with sigma ~0.09
    // sqrt(n); the bound is 4 sigma, a sign or layout error is ~sqrt(n) off.
    CHECK(std::abs(e40 - exact) < 0.36 * std::sqrt(double(n)));

    std::vector<BlockQ5_0> w50(std::size_t(n / QK5_0));
    quantize_row(TensorType::Q5_0, wx.data(), w50.data(), n);
    const double e50 = dequant_dot(TensorType::Q5_0, w50, a, n);
    CHECK(dot_q5_0_q8_0(n, w50.data(), a.data()) == doctest::Approx(e50).epsilon(1e-5));
    CHECK(std::abs(e50 - exact) < 0.18 * std::sqrt(double(n)));  // errors of RMS ~0.045

    std::vector<BlockQ4_1> w41(std::size_t(n / QK4_1));
    quantize_row(TensorType::Q4_1, wx.data(), w41.data(), n);
    const double e41 = dequant_dot(TensorType::Q4_1, w41, a, n);
    CHECK(dot_q4_1_q8_0(n, w41.data(), a.data()) == doctest::Approx(e41).epsilon(1e-5));
    CHECK(std::abs(e41 - exact) < 0.33 * std::sqrt(double(n)));  // errors of RMS ~0.08

    std::vector<BlockQ5_1> w51(std::size_t(n / QK5_1));
    quantize_row(TensorType::Q5_1, wx.data(), w51.data(), n);
    const double e51 = dequant_dot(TensorType::Q5_1, w51, a, n);
    CHECK(dot_q5_1_q8_0(n, w51.data(), a.data()) == doctest::Approx(e51).epsilon(1e-5));
    CHECK(std::abs(e51 - exact) < 0.17 * std::sqrt(double(n)));  // Q4_1's steps halved: errors of RMS ~0.04
}

TEST_CASE("IQ4_NL and IQ4_XS reference dot products equal dequantize-then-multiply on llama.cpp's blocks") {
    // smol has no quantizer for them: the weights are the first 8 rows of blk.0.attn_k of the
    // llama.cpp-quantized files (tests/data/tiny-quants), as one row of 2048.
    const std::int64_t n = 8 * 256;
    const auto ax = gaussian(std::size_t(n), 15);
    const auto weights = [&]<class Block>(TensorType type, Block*) {
        const auto file = gguf::File::open(SMOL_TEST_DATA_DIR "/tiny-quants/smollm3-tiny-" + std::string(type_name(type)) + ".gguf");
        const gguf::TensorInfo& t = file.tensor("blk.0.attn_k.weight");
        REQUIRE(t.type == type);
        const auto* blocks = reinterpret_cast<const Block*>(t.data);
        return std::vector<Block>(blocks, blocks + n / std::int64_t(traits_of(type).block_elements));
    };
    std::vector<BlockQ8_0> a0(std::size_t(n / QK8_0));
    quantize_row_q8_0(ax.data(), a0.data(), n);
    const auto wnl = weights(TensorType::IQ4_NL, static_cast<BlockIQ4NL*>(nullptr));
    const double enl = dequant_dot(TensorType::IQ4_NL, wnl, a0, n);
    CHECK(dot_iq4_nl_q8_0(n, wnl.data(), a0.data()) == doctest::Approx(enl).epsilon(1e-5));
    CHECK(std::abs(enl) > 0.1);

    std::vector<BlockQ8K> ak(std::size_t(n / QK_K));
    quantize_row_q8_k(ax.data(), ak.data(), n);
    const auto wxs = weights(TensorType::IQ4_XS, static_cast<BlockIQ4XS*>(nullptr));
    const double exs = dequant_dot(TensorType::IQ4_XS, wxs, ak, n);
    CHECK(dot_iq4xs_q8k(n, wxs.data(), ak.data()) == doctest::Approx(exs).epsilon(1e-5));
    CHECK(std::abs(exs) > 0.1);
}

TEST_CASE("reference float dot products") {
    const float w[5] = {1.0f, -2.0f, 0.5f, 4.0f, 3.0f};
    const float x[5] = {2.0f, 1.0f, 8.0f, -0.25f, 1.0f};
    CHECK(dot_f32(5, w, x) == 2.0f - 2.0f + 4.0f - 1.0f + 3.0f);
    std::uint16_t h[5], bf[5];
    for (int i = 0; i < 5; ++i) {
        h[i] = f32_to_fp16(w[i]);
        bf[i] = f32_to_bf16(w[i]);
    }
    CHECK(dot_f16(5, h, x) == 6.0f);
    CHECK(dot_bf16(5, bf, x) == 6.0f);
}

}  // namespace test_quant
