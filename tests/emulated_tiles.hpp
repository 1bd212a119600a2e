#pragma once
// An emulation of the AMX tile instructions, shared by the tests of the AMX GEMMs
// (test_quant_kernels) and of the AMX int8 peak loop (test_int8_peak).

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/dispatch.hpp"

#if SMOL_HAVE_AMX_KERNELS

namespace smol::testing {

// The AMX instructions the kernels use, as the Intel SDM defines them, on byte arrays: lets the
// AMX GEMMs' layout and arithmetic run on any AVX-512 CPU. Shapes the hardware would refuse
// (#UD) fail the test instead.
struct EmulatedTiles {
    smol::kernels_amx::TileConfig config;
    bool configured = false;
    std::uint8_t tiles[8][16][64] = {};
    int rows(int t) const { return config.rows[t]; }
    int bytes(int t) const { return config.bytes_per_row[t]; }

    void configure(const smol::kernels_amx::TileConfig& c) {
        REQUIRE(c.palette == 1);
        config = c;
        configured = true;
        std::memset(tiles, 0, sizeof tiles);  // LDTILECFG zeroes every tile
    }
    void release() { configured = false; }
    template <int T>
    void zero() {
        REQUIRE(configured);
        std::memset(tiles[T], 0, sizeof tiles[T]);
    }
    template <int T>
    void load(const void* base, std::size_t stride) {
        REQUIRE(configured);
        std::memset(tiles[T], 0, sizeof tiles[T]);
        for (int r = 0; r < rows(T); ++r)
            std::memcpy(tiles[T][r], static_cast<const std::uint8_t*>(base) + std::size_t(r) * stride, std::size_t(bytes(T)));
    }
    template <int T>
    void store(void* base, std::size_t stride) {
        REQUIRE(configured);
        for (int r = 0; r < rows(T); ++r)
            std::memcpy(static_cast<std::uint8_t*>(base) + std::size_t(r) * stride, tiles[T][r], std::size_t(bytes(T)));
    }
    // C[m].dword[n] += sum over k, i of A[m].byte[4k + i] * B[k].byte[4n + i] (TDPBUSD / TDPBSSD).
    template <int C, int A, int B, bool SignedA>
    void dot() {
        REQUIRE(configured);
        REQUIRE(rows(A) == rows(C));
        REQUIRE(bytes(A) / 4 == rows(B));
        REQUIRE(bytes(B) == bytes(C));
        for (int m = 0; m < rows(C); ++m)
            for (int n = 0; n < bytes(C) / 4; ++n) {
                std::int32_t sum;
                std::memcpy(&sum, &tiles[C][m][4 * n], 4);
                for (int k = 0; k < bytes(A) / 4; ++k)
                    for (int i = 0; i < 4; ++i) {
                        const std::uint8_t a = tiles[A][m][4 * k + i];
                        const int a_value = SignedA ? int(std::int8_t(a)) : int(a);
                        sum += a_value * int(std::int8_t(tiles[B][k][4 * n + i]));
                    }
                std::memcpy(&tiles[C][m][4 * n], &sum, 4);
            }
    }
    template <int C, int A, int B>
    void dot_unsigned_signed() { dot<C, A, B, false>(); }
    template <int C, int A, int B>
    void dot_signed_signed() { dot<C, A, B, true>(); }
};

}  // namespace smol::testing

#endif  // SMOL_HAVE_AMX_KERNELS
