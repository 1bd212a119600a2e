// Every kernel set compiled in, against the scalar reference dot products, on random blocks and
// every tile shape (1..kTileRows rows x 1..kTileCols columns), padded strides included. Sets the
// CPU cannot run are skipped with a message naming what is missing.

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "smol/core/cpu.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/dispatch.hpp"
#include "smol/quant/packing.hpp"
#include "smol/quant/reference.hpp"
#include "emulated_tiles.hpp"

#if SMOL_HAVE_AVX2_KERNELS
#include <immintrin.h>
#endif

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_quant_kernels {

using namespace smol;

namespace {

bool runnable(Isa isa) {
    if (!isa_compiled(isa)) {
        MESSAGE("skipping kernel set ", isa_name(isa), ": not compiled into this build");
        return false;
    }
    if (!cpu_features().supports(isa)) {
        MESSAGE("skipping kernel set ", isa_name(isa), ": this CPU lacks it (", describe(), ")");
        return false;
    }
    return true;
}

// Exact mode: power-of-two scales and small sub-block scales, so every partial sum the kernels
// form is exact in float and results must agree bit for bit. Otherwise: realistic random scales.
struct Gen {
    std::mt19937 rng;
    bool exact;
    // extreme: each k-quant block's quants all at their lowest or all at their largest, Q8_K
    // activations at -127 or 127 (the quantizer's range)
    bool extreme = false;
    std::uint8_t extreme_byte = 0xff;

    std::uint8_t quant_byte() { return extreme ? extreme_byte : byte(); }
    void start_block() {
        if (extreme) extreme_byte = uniform(0, 1) ? 0xff : 0x00;
    }

    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
    std::uint8_t byte() { return std::uint8_t(uniform(0, 255)); }
    std::uint16_t half_in(float lo, float hi) {
        return f32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
    }

    BlockQ4K q4k() {
        BlockQ4K b;
        start_block();
        b.d = exact ? f32_to_fp16(1.0f / 16) : half_in(0.0005f, 0.02f);
        b.dmin = exact ? f32_to_fp16(1.0f / 32) : half_in(0.0005f, 0.02f);
        for (auto& s : b.scales) s = byte();
        if (exact) {  // every 6-bit scale and min below 8
            for (int i = 0; i < 8; ++i) b.scales[i] &= 0x07;
            for (int i = 8; i < 12; ++i) b.scales[i] &= 0x77;
        }
        for (auto& q : b.qs) q = quant_byte();
        return b;
    }
    BlockQ6K q6k() {
        BlockQ6K b;
        start_block();
        for (auto& q : b.ql) q = quant_byte();
        for (auto& q : b.qh) q = quant_byte();
        for (auto& s : b.scales) s = std::int8_t(exact ? uniform(-8, 8) : uniform(-128, 127));
        b.d = exact ? f32_to_fp16(1.0f / 8) : half_in(-0.01f, 0.01f);
        return b;
    }
    // IQ4_XS: extreme has every scale at -32 (the stored 0) and the table's two ends (nibbles 0
    // and 15) against activations of -127 and 127.
    BlockIQ4XS iq4xs() {
        BlockIQ4XS b;
        b.d = exact ? f32_to_fp16(1.0f / 8) : half_in(-0.01f, 0.01f);
        b.scales_h = extreme ? 0 : std::uint16_t(uniform(0, 0xffff));
        for (auto& s : b.scales_l) s = extreme ? 0 : byte();
        for (auto& q : b.qs) q = extreme ? std::uint8_t(uniform(0, 1) ? 0xf0 : 0x0f) : byte();
        return b;
    }
    BlockQ2K q2k() {
        BlockQ2K b;
        start_block();
        for (auto& s : b.scales) s = exact ? std::uint8_t(byte() & 0x77) : byte();  // exact: scales and mins below 8
        for (auto& q : b.qs) q = quant_byte();
        b.d = exact ? f32_to_fp16(1.0f / 16) : half_in(0.0005f, 0.02f);
        b.dmin = exact ? f32_to_fp16(1.0f / 32) : half_in(0.0005f, 0.02f);
        return b;
    }
    BlockQ3K q3k() {
        BlockQ3K b;
        start_block();
        for (auto& q : b.hmask) q = quant_byte();
        for (auto& q : b.qs) q = quant_byte();
        for (auto& s : b.scales) s = byte();
        if (exact)  // every scale's top two bits 2: stored 32..47, scales 0..15
            for (int i = 8; i < 12; ++i) b.scales[i] = 0xaa;
        b.d = exact ? f32_to_fp16(1.0f / 8) : half_in(-0.01f, 0.01f);
        return b;
    }
    BlockQ5K q5k() {
        BlockQ5K b;
        const BlockQ4K head = q4k();  // the same header: d, dmin and packed 6-bit scales and mins
        b.d = head.d;
        b.dmin = head.dmin;
        std::memcpy(b.scales, head.scales, sizeof b.scales);
        for (auto& q : b.qh) q = quant_byte();
        for (auto& q : b.qs) q = quant_byte();
        return b;
    }
    BlockQ8K q8k() {
        BlockQ8K b;
        b.d = exact ? 1.0f / 64 : std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng);
        const bool all_lowest = extreme && uniform(0, 1) == 0;  // the largest sums, all of one sign
        for (auto& q : b.qs)
            q = std::int8_t(all_lowest ? -127 : extreme ? (uniform(0, 1) ? 127 : -127) : uniform(-127, 127));
        for (int j = 0; j < QK_K / 16; ++j) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += b.qs[16 * j + l];
            b.bsums[j] = std::int16_t(s);
        }
        return b;
    }
    BlockQ8_0 q8_0() {
        BlockQ8_0 b;
        b.d = exact ? f32_to_fp16(1.0f / 4) : half_in(-0.05f, 0.05f);
        for (auto& q : b.qs) q = std::int8_t(uniform(-127, 127));
        return b;
    }
};

// sum_i |w_i| |a_i| over a row pair: the scale of the float rounding a kernel may add.
double magnitude(TensorType wtype, const std::uint8_t* w, TensorType atype, const std::uint8_t* a, std::int64_t n) {
    std::vector<float> wf(static_cast<std::size_t>(n)), af(static_cast<std::size_t>(n));
    if (wtype == TensorType::Q4_K) {
        // The scale and min terms are summed apart, so each counts on its own.
        const std::size_t blocks = std::size_t(n / QK_K);
        std::vector<BlockQ4K> scale_part(blocks), min_part(blocks);
        std::memcpy(scale_part.data(), w, blocks * sizeof(BlockQ4K));
        std::memcpy(min_part.data(), w, blocks * sizeof(BlockQ4K));
        for (std::size_t b = 0; b < blocks; ++b) {
            scale_part[b].dmin = 0;
            min_part[b].d = 0;
        }
        std::vector<float> mf(static_cast<std::size_t>(n));
        dequantize_row(TensorType::Q4_K, scale_part.data(), wf.data(), n);
        dequantize_row(TensorType::Q4_K, min_part.data(), mf.data(), n);
        for (std::size_t i = 0; i < wf.size(); ++i) wf[i] = std::abs(wf[i]) + std::abs(mf[i]);
    } else {
        dequantize_row(wtype, w, wf.data(), n);
    }
    if (atype == TensorType::Q8_K) {
        const auto* blocks = reinterpret_cast<const BlockQ8K*>(a);
        for (std::int64_t i = 0; i < n; ++i) af[std::size_t(i)] = blocks[i / QK_K].d * blocks[i / QK_K].qs[i % QK_K];
    } else {
        dequantize_row(atype, a, af.data(), n);
    }
    double m = 0;
    for (std::int64_t i = 0; i < n; ++i) m += std::abs(double(wf[std::size_t(i)]) * af[std::size_t(i)]);
    return m;
}

struct Operands {
    std::vector<std::uint8_t> weights;  // [kTileRows, row_bytes]
    std::size_t row_bytes;
    std::vector<std::uint8_t> acts;  // [kTileCols, act_stride]
    std::size_t act_stride;
};

// Runs `tile` on every shape and compares each output with `reference(row, column)`. Also
// checks that an output's bits do not depend on the tile's shape: the server batches the decode
// steps of several users, and each must get the logits it would get alone.
template <class Reference>
void check_tiles(DotTileFn tile, std::int64_t n, const Operands& ops, Reference reference, double tolerance_scale,
                 TensorType wtype, TensorType atype) {
    constexpr std::size_t out_stride = kTileRows + 3;
    const float sentinel = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> full(out_stride * kTileCols, sentinel);  // the whole kTileRows x kTileCols tile
    tile(n, ops.weights.data(), ops.row_bytes, kTileRows, ops.acts.data(), ops.act_stride, kTileCols, full.data(),
         out_stride);
    for (int n_rows = 1; n_rows <= kTileRows; ++n_rows)
        for (int n_cols = 1; n_cols <= kTileCols; ++n_cols) {
            std::vector<float> out(out_stride * kTileCols, sentinel);
            tile(n, ops.weights.data(), ops.row_bytes, n_rows, ops.acts.data(), ops.act_stride, n_cols, out.data(),
                 out_stride);
            for (int c = 0; c < kTileCols; ++c)
                for (std::size_t r = 0; r < out_stride; ++r) {
                    const float got = out[std::size_t(c) * out_stride + r];
                    if (c >= n_cols || int(r) >= n_rows) {
                        REQUIRE(std::isnan(got));  // outside the tile: untouched
                        continue;
                    }
                    const float expected = reference(int(r), c);
                    const double tol =
                        tolerance_scale * magnitude(wtype, ops.weights.data() + r * ops.row_bytes, atype,
                                                    ops.acts.data() + std::size_t(c) * ops.act_stride, n);
                    INFO("n " << n << " tile " << n_rows << "x" << n_cols << " at (" << r << ", " << c << ")");
                    const float in_full_tile = full[std::size_t(c) * out_stride + r];
                    REQUIRE(std::memcmp(&got, &in_full_tile, sizeof got) == 0);
                    if (tolerance_scale == 0) {
                        REQUIRE(got == expected);
                    } else {
                        REQUIRE(std::abs(double(got) - expected) <= tol);
                    }
                }
        }
}

template <class Block, class Make>
std::vector<std::uint8_t> rows_of(int n_rows, std::int64_t blocks, std::size_t stride, Make make) {
    std::vector<std::uint8_t> bytes(std::size_t(n_rows) * stride, 0xcd);
    for (int r = 0; r < n_rows; ++r)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const Block block = make();
            std::memcpy(bytes.data() + std::size_t(r) * stride + std::size_t(b) * sizeof(Block), &block, sizeof(Block));
        }
    return bytes;
}

// A random block of each k-quant type, and the reference dot product it is checked against.
template <class Weight>
Weight random_block(Gen& gen) {
    if constexpr (std::is_same_v<Weight, BlockQ2K>) return gen.q2k();
    if constexpr (std::is_same_v<Weight, BlockQ3K>) return gen.q3k();
    if constexpr (std::is_same_v<Weight, BlockQ4K>) return gen.q4k();
    if constexpr (std::is_same_v<Weight, BlockQ5K>) return gen.q5k();
    if constexpr (std::is_same_v<Weight, BlockQ6K>) return gen.q6k();
    if constexpr (std::is_same_v<Weight, BlockIQ4XS>) return gen.iq4xs();
}

inline float reference_dot(std::int64_t n, const BlockQ2K* w, const BlockQ8K* a) { return dot_q2k_q8k(n, w, a); }
inline float reference_dot(std::int64_t n, const BlockQ3K* w, const BlockQ8K* a) { return dot_q3k_q8k(n, w, a); }
inline float reference_dot(std::int64_t n, const BlockQ4K* w, const BlockQ8K* a) { return dot_q4k_q8k(n, w, a); }
inline float reference_dot(std::int64_t n, const BlockQ5K* w, const BlockQ8K* a) { return dot_q5k_q8k(n, w, a); }
inline float reference_dot(std::int64_t n, const BlockQ6K* w, const BlockQ8K* a) { return dot_q6k_q8k(n, w, a); }
inline float reference_dot(std::int64_t n, const BlockIQ4XS* w, const BlockQ8K* a) { return dot_iq4xs_q8k(n, w, a); }

// f(Block{}) for the block struct of a weight type of 256-weight super-blocks (the k-quants and
// IQ4_XS, which meet Q8_K activations).
template <class F>
decltype(auto) visit_kquant(TensorType type, F&& f) {
    switch (type) {
        case TensorType::Q2_K: return f(BlockQ2K{});
        case TensorType::Q3_K: return f(BlockQ3K{});
        case TensorType::Q4_K: return f(BlockQ4K{});
        case TensorType::Q5_K: return f(BlockQ5K{});
        case TensorType::Q6_K: return f(BlockQ6K{});
        case TensorType::IQ4_XS: return f(BlockIQ4XS{});
        default: throw std::logic_error("not a super-block weight type: " + std::string(type_name(type)));
    }
}

// Random weights of one k-quant type against random Q8_K activations (or, `extreme`, each block's
// quants at their lowest or largest against activations of -127 and 127: the kernels' largest
// integer sums).
template <class Weight>
void check_kquant(Isa isa, TensorType wtype, bool exact, std::uint32_t seed, bool extreme = false) {
    const KernelSet set = kernels_for(isa);
    const DotTileFn tile = set.for_weights(wtype);
    Gen gen{std::mt19937(seed), exact, extreme};
    CAPTURE(extreme);
    // 17152 weights (67 blocks) crosses the decode kernels' 64-block runs.
    for (const std::int64_t n : {std::int64_t(256), std::int64_t(1024), std::int64_t(2816), std::int64_t(17152)}) {
        const std::int64_t blocks = n / QK_K;
        Operands ops;
        ops.row_bytes = std::size_t(blocks) * sizeof(Weight) + 40;  // padded rows
        ops.act_stride = std::size_t(blocks) * sizeof(BlockQ8K) + 12;
        ops.weights = rows_of<Weight>(kTileRows, blocks, ops.row_bytes, [&] { return random_block<Weight>(gen); });
        ops.acts = rows_of<BlockQ8K>(kTileCols, blocks, ops.act_stride, [&] { return gen.q8k(); });
        const auto reference = [&](int r, int c) {
            const auto* w = reinterpret_cast<const Weight*>(ops.weights.data() + std::size_t(r) * ops.row_bytes);
            const auto* a = reinterpret_cast<const BlockQ8K*>(ops.acts.data() + std::size_t(c) * ops.act_stride);
            return reference_dot(n, w, a);
        };
        // Every set reproduces the reference's bits (reference.hpp, q4k_accumulate_block), with
        // realistic scales too.
        check_tiles(tile, n, ops, reference, 0.0, wtype, TensorType::Q8_K);
        if (exact && n == 256) {  // the exact mode must not be vacuous: results are non-trivial
            CHECK(reference(0, 0) != 0.0f);
        }
    }
}


}  // namespace

// Every kernel reads its blocks' half scales through fp16_to_f32, which takes the CPU's own
// conversion where it has one (AArch64's fcvt): the same bits as the portable conversion for all
// 65536 halves, signalling NaNs included.
TEST_CASE("fp16_to_f32 gives the portable conversion's bits for every half") {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float fast = fp16_to_f32(std::uint16_t(h)), portable = fp16_to_f32_portable(std::uint16_t(h));
        REQUIRE(std::bit_cast<std::uint32_t>(fast) == std::bit_cast<std::uint32_t>(portable));
    }
}

TEST_CASE("Q4_K x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockQ4K>(isa, TensorType::Q4_K, true, 1);
        check_kquant<BlockQ4K>(isa, TensorType::Q4_K, false, 2);
        check_kquant<BlockQ4K>(isa, TensorType::Q4_K, false, 102, true);
    }
}

TEST_CASE("Q2_K x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockQ2K>(isa, TensorType::Q2_K, true, 55);
        check_kquant<BlockQ2K>(isa, TensorType::Q2_K, false, 56);
        check_kquant<BlockQ2K>(isa, TensorType::Q2_K, false, 156, true);
    }
}

TEST_CASE("Q3_K x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockQ3K>(isa, TensorType::Q3_K, true, 53);
        check_kquant<BlockQ3K>(isa, TensorType::Q3_K, false, 54);
        check_kquant<BlockQ3K>(isa, TensorType::Q3_K, false, 154, true);
    }
}

TEST_CASE("Q5_K x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockQ5K>(isa, TensorType::Q5_K, true, 51);
        check_kquant<BlockQ5K>(isa, TensorType::Q5_K, false, 52);
        check_kquant<BlockQ5K>(isa, TensorType::Q5_K, false, 152, true);
    }
}

TEST_CASE("Q6_K x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockQ6K>(isa, TensorType::Q6_K, true, 3);
        check_kquant<BlockQ6K>(isa, TensorType::Q6_K, false, 4);
        check_kquant<BlockQ6K>(isa, TensorType::Q6_K, false, 104, true);
    }
}
TEST_CASE("IQ4_XS x Q8_K tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_kquant<BlockIQ4XS>(isa, TensorType::IQ4_XS, true, 5);
        check_kquant<BlockIQ4XS>(isa, TensorType::IQ4_XS, false, 6);
        check_kquant<BlockIQ4XS>(isa, TensorType::IQ4_XS, false, 106, true);
    }
}
namespace {

#if SMOL_HAVE_AVX2_KERNELS
// vpdpbusd (acc + the 4 products of unsigned bytes u and signed bytes s in each i32 lane) in plain
// AVX2, exactly: dpbusd.hpp's MaddubsDot, which the AVX2 set runs for IQ4_XS's GEMM. Runs the
// VNNI kernels written over a Dot on CPUs without VNNI.
using EmulatedDot = MaddubsDot;

// The same with its two byte operands swapped: what a kernel passing them in the wrong order computes.
struct SwappedEmulatedDot {
    static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) { return EmulatedDot::dpbusd(acc, s, u); }
};

// A row-group kernel's Columns (row_group_tiles.hpp) as a GroupDotFn.
template <template <int> class Columns>
void group_dot(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride, int n_cols,
                    float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<Columns>(n, group, acts, act_stride, n_cols, out, out_stride);
}
#endif

// The 8 rows of a group as the conversions take them: row r at blocks + r.
template <class Block>
struct RowPointers {
    Block* rows[kGroupRows];
    explicit RowPointers(Block* blocks) {
        for (int r = 0; r < kGroupRows; ++r) rows[r] = blocks + r;
    }
};

// One of the conversions' 8 x 8 transposes of `Bytes`-byte elements against the reference, on
// rows 8 bytes longer than it reads (whose ends must stay untouched).
using TransposeFn = void (*)(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]);
template <std::size_t Bytes>
void check_transpose(TransposeFn transpose) {
    constexpr std::size_t width = 8 * Bytes + 8;
    std::uint8_t source[8][width], got[8][width], want[8][width];
    for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < width; ++j) source[i][j] = std::uint8_t(i * width + j);
    std::memset(got, 0xcd, sizeof got);
    std::memset(want, 0xcd, sizeof want);
    const std::uint8_t* const from[8] = {source[0], source[1], source[2], source[3], source[4], source[5], source[6], source[7]};
    std::uint8_t* const to_got[8] = {got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7]};
    std::uint8_t* const to_want[8] = {want[0], want[1], want[2], want[3], want[4], want[5], want[6], want[7]};
    transpose(from, to_got);
    row_group_detail::transpose_reference<Bytes>(from, to_want);
    REQUIRE(std::memcmp(got, want, sizeof got) == 0);
    CHECK(std::memcmp(&want[3][2 * Bytes], &source[2][3 * Bytes], Bytes) == 0);  // element (3, 2) is the source's (2, 3)
}

// A group kernel to check besides the sets' own: a name and the kernel.
struct NamedGroupDot {
    const char* name;
    GroupDotFn dot;
};

// One k-quant's row groups: restored byte for byte, and each set's group kernel (and `extra`)
// against the reference dot of the rows as stored, for 1..kTileCols columns.
template <class Weight>
void check_row_groups(TensorType type, const std::vector<NamedGroupDot>& extra = {}) {
    CAPTURE(type_name(type));
    const RowGroupLayout& layout = weight_row(type).row_groups;
    REQUIRE(layout.exists());
    // extreme: the lowest or largest quants against -127/127, the bounds of the kernels' i16 runs.
    for (const bool extreme : {false, true}) {
        CAPTURE(extreme);
        Gen gen{std::mt19937(extreme ? 91 : 90), false};
        gen.extreme = extreme;
        // 17152 weights: 67 blocks, more than any run a kernel keeps.
        for (const std::int64_t n : {std::int64_t(256), std::int64_t(2816), std::int64_t(17152)}) {
            CAPTURE(n);
            const std::int64_t blocks = n / QK_K;
            const std::size_t row_bytes = std::size_t(blocks) * sizeof(Weight) + 40;  // padded rows
            const std::size_t act_stride = std::size_t(blocks) * sizeof(BlockQ8K) + 12;
            const auto rows = rows_of<Weight>(kGroupRows, blocks, row_bytes, [&] { return random_block<Weight>(gen); });
            const auto acts = rows_of<BlockQ8K>(kTileCols, blocks, act_stride, [&] { return gen.q8k(); });
            std::vector<std::uint8_t> group(std::size_t(blocks) * layout.block_bytes);
            layout.interleave(rows.data(), row_bytes, blocks, group.data());
            std::vector<std::uint8_t> restored(rows.size(), 0xcd);  // the padding as rows_of leaves it
            layout.deinterleave(group.data(), blocks, restored.data(), row_bytes);
            REQUIRE(restored == rows);
            std::vector<NamedGroupDot> dots = extra;
            for (const Isa isa : kAllIsas)
                if (runnable(isa)) dots.push_back({isa_name(isa).data(), kernels_for(isa).for_row_groups(type)});
            for (const auto& [name, dot] : dots) {
                CAPTURE(std::string(name));
                for (int n_cols = 1; n_cols <= kTileCols; ++n_cols) {
                    CAPTURE(n_cols);
                    constexpr std::size_t out_stride = kGroupRows + 3;
                    std::vector<float> out(out_stride * kTileCols, std::numeric_limits<float>::quiet_NaN());
                    dot(n, group.data(), acts.data(), act_stride, n_cols, out.data(), out_stride);
                    for (int c = 0; c < kTileCols; ++c)
                        for (std::size_t r = 0; r < out_stride; ++r) {
                            const float got = out[std::size_t(c) * out_stride + r];
                            if (c >= n_cols || r >= std::size_t(kGroupRows)) {
                                REQUIRE(std::isnan(got));  // outside the group and columns: untouched
                                continue;
                            }
                            const float want = reference_dot(
                                n, reinterpret_cast<const Weight*>(rows.data() + r * row_bytes),
                                reinterpret_cast<const BlockQ8K*>(acts.data() + std::size_t(c) * act_stride));
                            INFO("row " << r << " column " << c);
                            REQUIRE(std::memcmp(&got, &want, sizeof got) == 0);
                        }
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("Q4_K and Q6_K row groups: restored byte for byte, and every set's group kernel gives the reference's bits") {
    CHECK(weight_row(TensorType::Q4_K).row_groups.block_bytes == sizeof(BlockQ4Kx8));
    CHECK(weight_row(TensorType::Q6_K).row_groups.block_bytes == sizeof(BlockQ6Kx8));
    check_transpose<4>(row_group_detail::transpose_quads);  // the quants, both ways
    check_transpose<2>(row_group_detail::transpose_pairs);  // Q6_K's scales, both ways
    {  // a Q4_K block's restored heads, vectorized, against the byte-by-byte reference, on
       // arbitrary bytes (a valid group holds 6-bit scales; the two agree on any input)
        std::mt19937 rng(17);
        for (int trial = 0; trial < 200; ++trial) {
            BlockQ4Kx8 group;
            BlockQ4K rows_got[kGroupRows], rows_want[kGroupRows];
            auto* group_bytes = reinterpret_cast<std::uint8_t*>(&group);
            for (std::size_t i = 0; i < sizeof group; ++i) group_bytes[i] = std::uint8_t(rng());
            std::memset(rows_got, 0xcd, sizeof rows_got);
            std::memset(rows_want, 0xcd, sizeof rows_want);
            row_group_detail::restore_q4k_heads(group, RowPointers(rows_got).rows);
            row_group_detail::restore_q4k_heads_reference(group, RowPointers(rows_want).rows);
            REQUIRE(std::memcmp(rows_got, rows_want, sizeof rows_got) == 0);
            CHECK(rows_want[6].scales[5] == std::uint8_t(group.mins[0][6][1] | (group.mins[2][6][1] >> 4) << 6));
        }
    }
    // The AVX-VNNI set's kernels are the VNNI form with VEX vpdpbusd; with the instruction emulated
    // they run (and are checked) on every CPU, whether or not it has AVX-VNNI.
#if SMOL_HAVE_AVX2_KERNELS
    using Emulated = row_group_tiles::VnniColumns<EmulatedDot>;
    const std::vector<NamedGroupDot> emulated_q4k = {{"VNNI form, vpdpbusd emulated", group_dot<Emulated::Q4K>}};
    const std::vector<NamedGroupDot> emulated_q6k = {{"VNNI form, vpdpbusd emulated", group_dot<Emulated::Q6K>}};
#else
    const std::vector<NamedGroupDot> emulated_q4k, emulated_q6k;
#endif
    for (const TensorType type : {TensorType::Q4_K, TensorType::Q6_K})
        visit_kquant(type, [&](auto block) {
            check_row_groups<decltype(block)>(type, type == TensorType::Q4_K ? emulated_q4k : emulated_q6k);
        });

}


namespace {

// A GEMM call: out[t * out_stride + r] for r < n_rows and t < n_tokens (GemmTileFn's contract).
using GemmCall = std::function<void(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                    const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride)>;

// Random rows of a type with Q8_K activations (k-quant or IQ4_XS) against random Q8_K tokens (or,
// `extreme`, each block's quants at their lowest or largest against activations of -127 and 127)
// through `gemm` (which may pick its kernel by the token count, as dispatch does), for every row
// count up to shape.rows and token counts up to shape.tokens, from the first group and from a
// later one. Every output must be the reference's bits, and nothing outside the n_rows x n_tokens
// corner may be written.
void check_gemm(TensorType wtype, const GemmShape& shape, const std::function<GemmCall(int n_tokens)>& gemm_for,
                std::uint32_t seed, bool extreme = false) {
    Gen gen{std::mt19937(seed), false, extreme};
    const std::int64_t n = 2816, blocks = n / QK_K;
    const int max_tokens = shape.tokens + 21;  // a call's worth and a partial group after it
    const auto acts = rows_of<BlockQ8K>(max_tokens, blocks, std::size_t(blocks) * sizeof(BlockQ8K), [&] { return gen.q8k(); });
    const auto* act_blocks = reinterpret_cast<const BlockQ8K*>(acts.data());
    std::vector<BlockQ8Kx16> packed(std::size_t((max_tokens + kPackedTokens - 1) / kPackedTokens * blocks));
    pack_q8k_x16(act_blocks, max_tokens, blocks, packed.data());
    const std::size_t row_bytes = std::size_t(blocks) * traits_of(wtype).block_bytes + 24;
    for (int trial = 0; trial < 3; ++trial) {
        const auto weights = visit_kquant(wtype, [&]<class Block>(Block) {
            return rows_of<Block>(shape.rows, blocks, row_bytes, [&] { return random_block<Block>(gen); });
        });
        std::vector<float> expected(std::size_t(shape.rows * max_tokens));  // [token][row]
        for (int t = 0; t < max_tokens; ++t)
            for (int r = 0; r < shape.rows; ++r) {
                const auto* w = weights.data() + std::size_t(r) * row_bytes;
                const BlockQ8K* a = act_blocks + std::size_t(t) * std::size_t(blocks);
                expected[std::size_t(t * shape.rows + r)] =
                    visit_kquant(wtype, [&]<class Block>(Block) { return reference_dot(n, reinterpret_cast<const Block*>(w), a); });
            }
        for (const int n_rows : {1, 3, shape.rows - 1, shape.rows})
            for (const int first_token : {0, shape.tokens})
                for (const int n_tokens : {1, 7, 16, 17, 33, 49, 65, shape.tokens}) {
                    if (n_tokens > shape.tokens || first_token + n_tokens > max_tokens || n_rows < 1) continue;
                    const std::size_t out_stride = std::size_t(shape.rows) + 1;
                    std::vector<float> out(out_stride * std::size_t(shape.tokens), std::numeric_limits<float>::quiet_NaN());
                    gemm_for(n_tokens)(n, weights.data(), row_bytes, n_rows,
                                       packed.data() + std::size_t(first_token / kPackedTokens * blocks), n_tokens,
                                       out.data(), out_stride);
                    for (int t = 0; t < shape.tokens; ++t)
                        for (int r = 0; r < int(out_stride); ++r) {
                            const float got = out[std::size_t(t) * out_stride + std::size_t(r)];
                            INFO("rows " << n_rows << " tokens " << first_token << "+" << n_tokens << " at (" << r << ", "
                                         << t << ")");
                            if (t >= n_tokens || r >= n_rows) {
                                REQUIRE(std::isnan(got));
                                continue;
                            }
                            const float want = expected[std::size_t((first_token + t) * shape.rows + r)];
                            REQUIRE(std::memcmp(&got, &want, sizeof got) == 0);
                        }
                }
    }
}

}  // namespace

TEST_CASE("k-quant and IQ4_XS prompt GEMMs give the reference's bits for every row and token count") {
    // Prompts go through the GEMM and decode through the tiles: the same bits from both keep a
    // sequence's logits independent of what shares its batch.
    int sets_with_gemm = 0;
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        for (const TensorType wtype : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                       TensorType::Q6_K, TensorType::IQ4_XS}) {
            CAPTURE(type_name(wtype));
            const KernelSet::Gemm widest = set.gemm_for_weights(wtype, kGemmShapes[int(isa)].tokens);
            if (widest.fn == nullptr) continue;
            ++sets_with_gemm;
            // A batch too small for the set's GEMM goes to a narrower set's (AMX: AVX-512's, 4 rows a
            // call), which runs over the rows in its own groups, as matmul does. A batch of fewer
            // than kMinGemmTokens goes through the tiles, but a GEMM still meets a few tokens: the
            // partial group at the end of a larger batch, as here.
            const auto gemm_for = [&](int n_tokens) {
                const KernelSet::Gemm g = set.gemm_for_weights(wtype, std::max(n_tokens, smol::kMinGemmTokens));
                REQUIRE(n_tokens <= g.shape.tokens);
                return GemmCall([g](std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                    const BlockQ8Kx16* acts, int n_tokens_, float* out, std::size_t out_stride) {
                    for (int r = 0; r < n_rows; r += g.shape.rows)
                        g.fn(n, weights + std::size_t(r) * row_bytes, row_bytes, std::min(g.shape.rows, n_rows - r), acts,
                             n_tokens_, out + r, out_stride);
                });
            };
            check_gemm(wtype, widest.shape, gemm_for, 60 + std::uint32_t(wtype));
            // The kernels sum products in narrow integers where the bounds allow (the AVX2 GEMMs
            // in i16): the extreme quants against activations of -127 and 127 reach those bounds
            // (Q6_K's runs of signed quants: 8 products of -32 * -127 in a lane).
            check_gemm(wtype, widest.shape, gemm_for, 80 + std::uint32_t(wtype), true);
            // Matrices held as row groups: the same rows read from a group, as either half of it
            // (the other half holds different rows), through the set's group GEMM where it has one.
            const RowGroupLayout& layout = weight_row(wtype).row_groups;
            if (!layout.exists()) continue;
            for (const int first_row : {0, kTileRows}) {
                CAPTURE(first_row);
                const auto group_gemm_for = [&](int n_tokens) {
                    const KernelSet::Gemm g = set.gemm_for_weights(wtype, std::max(n_tokens, smol::kMinGemmTokens));
                    return GemmCall([g, &layout, first_row](std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes,
                                                           int n_rows, const BlockQ8Kx16* acts, int n_tokens_, float* out,
                                                           std::size_t out_stride) {
                        REQUIRE(n_rows <= kTileRows);
                        std::vector<std::uint8_t> rows(kGroupRows * row_bytes);
                        for (int r = 0; r < kGroupRows; ++r) {
                            const int source = r / kTileRows == first_row / kTileRows ? std::min(r % kTileRows, n_rows - 1)
                                                                                       : (r + 1) % n_rows;
                            std::memcpy(rows.data() + std::size_t(r) * row_bytes, weights + std::size_t(source) * row_bytes,
                                        row_bytes);
                        }
                        const std::int64_t blocks = n / QK_K;
                        std::vector<std::uint8_t> group(std::size_t(blocks) * layout.block_bytes);
                        layout.interleave(rows.data(), row_bytes, blocks, group.data());
                        std::vector<float> all(std::size_t(n_tokens_) * kTileRows);
                        if (g.group_fn) {
                            g.group_fn(n, group.data(), first_row, acts, n_tokens_, all.data(), kTileRows);
                        } else {  // the set reads restored rows (AMX's own GEMM)
                            for (int r = 0; r < kTileRows; r += g.shape.rows)
                                g.fn(n, rows.data() + std::size_t(first_row + r) * row_bytes, row_bytes,
                                     std::min(g.shape.rows, kTileRows - r), acts, n_tokens_, all.data() + r, kTileRows);
                        }
                        for (int t = 0; t < n_tokens_; ++t)
                            for (int r = 0; r < n_rows; ++r)
                                out[std::size_t(t) * out_stride + std::size_t(r)] = all[std::size_t(t) * kTileRows + std::size_t(r)];
                    });
                };
                GemmShape group_shape = widest.shape;
                group_shape.rows = kTileRows;
                check_gemm(wtype, group_shape, group_gemm_for, 100 + std::uint32_t(wtype), first_row != 0);
            }
        }
    }
    if (sets_with_gemm == 0) MESSAGE("no kernel set with a prompt GEMM runs on this CPU (", describe(), ")");
}

#if SMOL_HAVE_AVX2_KERNELS
namespace {

// The AVX2 GEMM driver with vpdpbusd products (the AVX-VNNI set's GEMM, with the instruction
// emulated or in its EVEX form).
template <class Gemm, class Dot>
void dpbusd_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const BlockQ8Kx16* acts,
                 int n_tokens, float* out, std::size_t out_stride) {
    kernels_avx2::kquant_detail::kquant_gemm<Gemm, kernels_avx2::kquant_detail::DpbusdProducts<Dot>>(
        n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}
template <class Gemm, class Dot>
void dpbusd_group_gemm(std::int64_t n, const std::uint8_t* group, int first_row, const BlockQ8Kx16* acts, int n_tokens,
                       float* out, std::size_t out_stride) {
    kernels_avx2::kquant_detail::kquant_group_gemm<Gemm, kernels_avx2::kquant_detail::DpbusdProducts<Dot>>(
        n, group, first_row, acts, n_tokens, out, out_stride);
}
#if SMOL_HAVE_AVX512_KERNELS
template <class Gemm>
SMOL_TARGET_AVX512 __attribute__((flatten)) void evex_dpbusd_gemm(std::int64_t n, const std::uint8_t* weights,
                                                                  std::size_t row_bytes, int n_rows, const BlockQ8Kx16* acts,
                                                                  int n_tokens, float* out, std::size_t out_stride) {
    dpbusd_gemm<Gemm, EvexDot>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}
#endif

template <class Gemm>
void check_dpbusd_gemms(TensorType wtype, std::uint32_t seed) {
    CAPTURE(type_name(wtype));
    const GemmShape shape = kGemmShapes[int(Isa::avx_vnni)];
    for (const bool extreme : {false, true}) {
        CAPTURE(extreme);
        check_gemm(wtype, shape, [](int) { return GemmCall(dpbusd_gemm<Gemm, EmulatedDot>); }, seed, extreme);
#if SMOL_HAVE_AVX512_KERNELS
        if (cpu_features().supports(Isa::avx512))
            check_gemm(wtype, shape, [](int) { return GemmCall(evex_dpbusd_gemm<Gemm>); }, seed + 1, extreme);
#endif
    }
}

}  // namespace

TEST_CASE("vpdpbusd emulated in AVX2 adds the instruction's 4 products per lane") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        alignas(32) std::uint8_t u[32];
        alignas(32) std::int8_t s[32];
        alignas(32) std::int32_t acc[8], got[8];
        for (int i = 0; i < 32; ++i) {
            // Extremes often: 255 x -128 is the largest product.
            u[i] = trial % 4 == 0 ? 255 : std::uint8_t(rng());
            s[i] = trial % 4 == 0 ? std::int8_t(-128) : std::int8_t(rng());
        }
        for (int l = 0; l < 8; ++l) acc[l] = std::int32_t(rng() % 2000001) - 1000000;
        const auto load = [](const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); };
        _mm256_store_si256(reinterpret_cast<__m256i*>(got), EmulatedDot::dpbusd(load(acc), load(u), load(s)));
        for (int l = 0; l < 8; ++l) {
            std::int32_t want = acc[l];
            for (int k = 0; k < 4; ++k) want += std::int32_t(u[4 * l + k]) * std::int32_t(s[4 * l + k]);
            REQUIRE(got[l] == want);
        }
#if SMOL_HAVE_AVX512_KERNELS
        if (cpu_features().supports(Isa::avx512)) {
            alignas(32) std::int32_t evex[8];
            _mm256_store_si256(reinterpret_cast<__m256i*>(evex), EvexDot::dpbusd(load(acc), load(u), load(s)));
            REQUIRE(std::memcmp(evex, got, sizeof got) == 0);
        }
#endif
    }
}

TEST_CASE("the AVX-VNNI set's prompt GEMMs give the reference's bits with vpdpbusd emulated, and in its EVEX form") {
    // This set runs only on CPUs with AVX-VNNI (the GEMM test above covers it there); its driver
    // and products run here with the instruction emulated in AVX2, and with AVX-512's encoding of
    // the same instruction where the CPU has it.
    using namespace kernels_avx2::kquant_detail;
    check_dpbusd_gemms<Q2KGemm>(TensorType::Q2_K, 120);
    check_dpbusd_gemms<Q3KGemm>(TensorType::Q3_K, 122);
    check_dpbusd_gemms<Q4KGemm>(TensorType::Q4_K, 124);
    check_dpbusd_gemms<Q5KGemm>(TensorType::Q5_K, 126);
    check_dpbusd_gemms<Q6KGemm>(TensorType::Q6_K, 128);
    check_dpbusd_gemms<IQ4XSGemm>(TensorType::IQ4_XS, 130);
}
#endif

#if SMOL_HAVE_AMX_KERNELS
TEST_CASE("AMX GEMMs give the reference's bits, on emulated tiles and on AMX hardware") {
    const GemmShape shape = kGemmShapes[int(Isa::amx)];
    CHECK(shape.rows == kernels_amx::kRows);
    CHECK(shape.tokens == kernels_amx::kTokens);
    if (!cpu_features().has_avx512_kernels()) {
        MESSAGE("skipping the AMX GEMMs on emulated tiles: they prepare weights with AVX-512, which this CPU lacks (",
                describe(), ")");
    } else {
        for (const TensorType wtype : {TensorType::Q4_K, TensorType::Q6_K}) {
            CAPTURE(type_name(wtype));
            const bool q4 = wtype == TensorType::Q4_K;
            const GemmCall emulated = [q4](std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                           const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
                auto tiles = std::make_unique<testing::EmulatedTiles>();
                if (q4) kernels_amx::detail::gemm<true>(*tiles, n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
                else kernels_amx::detail::gemm<false>(*tiles, n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
                CHECK_FALSE(tiles->configured);  // every call releases its tiles
            };
            check_gemm(wtype, shape, [&](int) { return emulated; }, q4 ? 31 : 32);
        }
    }
    if (!runnable(Isa::amx)) return;
    // On the hardware: the kernels themselves, not the dispatch (which sends small batches to AVX-512).
    for (const TensorType wtype : {TensorType::Q4_K, TensorType::Q6_K}) {
        CAPTURE(type_name(wtype));
        const GemmTileFn hardware = weight_row(wtype).gemms[std::size_t(Isa::amx)];
        REQUIRE(static_cast<bool>(hardware));
        check_gemm(wtype, shape, [&](int) { return GemmCall(hardware); }, wtype == TensorType::Q4_K ? 41 : 42);
    }
}
#endif

namespace {

// Packed Q8_K activations against their definition: every quant, bsum and scale of each token in
// its lanes, zeros past n_tokens, and the sums recomputed from the quants.
void check_packed(const BlockQ8K* q, std::int64_t n_tokens, std::int64_t blocks, const std::vector<BlockQ8Kx16>& packed) {
    const std::int64_t groups = (n_tokens + kPackedTokens - 1) / kPackedTokens;
    for (std::int64_t token = 0; token < groups * kPackedTokens; ++token)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const BlockQ8Kx16& p = packed[std::size_t(token / kPackedTokens * blocks + b)];
            const int t = int(token % kPackedTokens);
            const bool real = token < n_tokens;
            const BlockQ8K* src = real ? &q[token * blocks + b] : nullptr;
            CHECK(p.d[t] == (real ? src->d : 0.0f));
            for (int i = 0; i < QK_K; ++i) REQUIRE(p.qs[i / 4][t][i % 4] == (real ? src->qs[i] : 0));
            for (int j = 0; j < QK_K / 16; ++j) REQUIRE(p.bsums[j / 2][t][j % 2] == (real ? src->bsums[j] : 0));
            // Sums from the quants themselves: 32 in a row, and per sub-block of 16 the quants a
            // vpmaddubsw lane meets (4-byte groups' bytes 0-1 the even lane, 2-3 the odd one).
            for (int i = 0; i < QK_K / 32; ++i) {
                int sum = 0;
                for (int l = 0; l < 32; ++l) sum += real ? src->qs[32 * i + l] : 0;
                REQUIRE(p.sums32[i / 2][t][i % 2] == sum);
            }
            for (int j = 0; j < QK_K / 16; ++j)
                for (int lane = 0; lane < 2; ++lane) {
                    int sum = 0;
                    for (int l = 0; l < 16; ++l)
                        if (l % 4 / 2 == lane) sum += real ? src->qs[16 * j + l] : 0;
                    REQUIRE(p.lane_sums16[j][t][lane] == sum);
                }
        }
}

}  // namespace

TEST_CASE("packing Q8_K activations 16 tokens to a block keeps every quant, bsum and scale, and sums them by lane") {
    // pack_q8k_x16 runs this build's packer (AVX2 on x86, where it is the baseline); the scalar
    // reference is checked as well, and the two must agree byte for byte.
    Gen gen{std::mt19937(23), false};
    const std::int64_t blocks = 3;
    for (const std::int64_t n_tokens : {1, 7, 8, 16, 21, 40}) {
        CAPTURE(n_tokens);
        const auto rows = rows_of<BlockQ8K>(int(n_tokens), blocks, std::size_t(blocks) * sizeof(BlockQ8K), [&] { return gen.q8k(); });
        const auto* q = reinterpret_cast<const BlockQ8K*>(rows.data());
        const std::size_t n_packed = std::size_t((n_tokens + kPackedTokens - 1) / kPackedTokens * blocks);
        std::vector<BlockQ8Kx16> packed(n_packed), reference(n_packed);
        std::memset(packed.data(), 0x5a, n_packed * sizeof(BlockQ8Kx16));  // every byte must be written
        std::memset(reference.data(), 0xa5, n_packed * sizeof(BlockQ8Kx16));
        pack_q8k_x16(q, n_tokens, blocks, packed.data());
        for (std::size_t i = 0; i < n_packed; ++i)
            packing_detail::pack_block_scalar(q, n_tokens, blocks, std::int64_t(i) / blocks, std::int64_t(i) % blocks, reference[i]);
        check_packed(q, n_tokens, blocks, packed);
        check_packed(q, n_tokens, blocks, reference);
        CHECK(std::memcmp(packed.data(), reference.data(), n_packed * sizeof(BlockQ8Kx16)) == 0);
    }
}

namespace {

// Random Q8_0 rows against random Q8_0 activations through `tile`, against the reference.
void check_q8_0(DotTileFn tile) {
        for (const bool exact : {true, false}) {
            Gen gen{std::mt19937(exact ? 5 : 6), exact};
            for (const std::int64_t n : {std::int64_t(32), std::int64_t(512), std::int64_t(2080)}) {
                const std::int64_t blocks = n / QK8_0;
                Operands ops;
                ops.row_bytes = std::size_t(blocks) * sizeof(BlockQ8_0) + 6;
                ops.act_stride = std::size_t(blocks) * sizeof(BlockQ8_0) + 2;
                ops.weights = rows_of<BlockQ8_0>(kTileRows, blocks, ops.row_bytes, [&] { return gen.q8_0(); });
                ops.acts = rows_of<BlockQ8_0>(kTileCols, blocks, ops.act_stride, [&] { return gen.q8_0(); });
                const auto reference = [&](int r, int c) {
                    return dot_q8_0_q8_0(
                        n, reinterpret_cast<const BlockQ8_0*>(ops.weights.data() + std::size_t(r) * ops.row_bytes),
                        reinterpret_cast<const BlockQ8_0*>(ops.acts.data() + std::size_t(c) * ops.act_stride));
                };
                check_tiles(tile, n, ops, reference, exact ? 0.0 : 1e-5, TensorType::Q8_0, TensorType::Q8_0);
            }
        }
}

}  // namespace

TEST_CASE("Q8_0 x Q8_0 tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_q8_0(kernels_for(isa).for_weights(TensorType::Q8_0));
    }
}

namespace {

// Random bytes, or (extreme) only 0x00 and 0xff: every quant 0 or its largest value.
std::uint8_t block32_byte(Gen& gen, bool extreme) { return extreme ? std::uint8_t(gen.uniform(0, 1) * 0xff) : gen.byte(); }

BlockQ4_0 block_q4_0(Gen& gen, bool extreme) {
    BlockQ4_0 b;
    b.d = gen.half_in(-0.02f, 0.02f);
    for (auto& q : b.qs) q = block32_byte(gen, extreme);
    return b;
}

BlockQ5_0 block_q5_0(Gen& gen, bool extreme) {
    BlockQ5_0 b;
    b.d = gen.half_in(-0.02f, 0.02f);
    for (auto& q : b.qh) q = block32_byte(gen, extreme);
    for (auto& q : b.qs) q = block32_byte(gen, extreme);
    return b;
}

BlockQ4_1 block_q4_1(Gen& gen, bool extreme) {
    BlockQ4_1 b;
    b.d = gen.half_in(0.0f, 0.02f);
    b.m = gen.half_in(-0.2f, 0.0f);
    for (auto& q : b.qs) q = block32_byte(gen, extreme);
    return b;
}

BlockQ5_1 block_q5_1(Gen& gen, bool extreme) {
    BlockQ5_1 b;
    b.d = gen.half_in(0.0f, 0.02f);
    b.m = gen.half_in(-0.2f, 0.0f);
    for (auto& q : b.qh) q = block32_byte(gen, extreme);
    for (auto& q : b.qs) q = block32_byte(gen, extreme);
    return b;
}

// Extreme: nibbles 0x0 and 0xf, the table's two ends (-127 and 113).
BlockIQ4NL block_iq4_nl(Gen& gen, bool extreme) {
    BlockIQ4NL b;
    b.d = gen.half_in(-0.02f, 0.02f);
    for (auto& q : b.qs) q = block32_byte(gen, extreme);
    return b;
}

// Q8_0 activations over the whole int8 range (-128 included, which the quantizer never writes
// but the kernels must still get right), or only its two ends.
BlockQ8_0 block32_activations(Gen& gen, bool extreme) {
    BlockQ8_0 b;
    b.d = gen.half_in(-0.05f, 0.05f);
    for (auto& q : b.qs) q = std::int8_t(extreme ? (gen.uniform(0, 1) ? 127 : -128) : gen.uniform(-128, 127));
    return b;
}

// Random weights of one block-of-32 format against random Q8_0 activations: every kernel set
// gives the reference's bits, on every tile shape.
template <class Block, float (*Dot)(std::int64_t, const Block*, const BlockQ8_0*)>
void check_block32(DotTileFn tile, TensorType wtype, Block (*make)(Gen&, bool), std::uint32_t seed) {
    Gen gen{std::mt19937(seed), false};
    // 1, 3, 17, 65 and 517 blocks: groups of four cut short, and past decode's 512-block runs.
    for (const std::int64_t n : {std::int64_t(32), std::int64_t(96), std::int64_t(544), std::int64_t(2080),
                                 std::int64_t(16544)})
        for (const bool extreme : {false, true}) {
            CAPTURE(n);
            CAPTURE(extreme);
            const std::int64_t blocks = n / QK8_0;
            Operands ops;
            ops.row_bytes = std::size_t(blocks) * sizeof(Block) + 6;  // padded rows
            ops.act_stride = std::size_t(blocks) * sizeof(BlockQ8_0) + 2;
            ops.weights = rows_of<Block>(kTileRows, blocks, ops.row_bytes, [&] { return make(gen, extreme); });
            ops.acts = rows_of<BlockQ8_0>(kTileCols, blocks, ops.act_stride, [&] { return block32_activations(gen, extreme); });
            const auto reference = [&](int r, int c) {
                return Dot(n, reinterpret_cast<const Block*>(ops.weights.data() + std::size_t(r) * ops.row_bytes),
                           reinterpret_cast<const BlockQ8_0*>(ops.acts.data() + std::size_t(c) * ops.act_stride));
            };
            check_tiles(tile, n, ops, reference, 0.0, wtype, TensorType::Q8_0);
            CHECK(reference(0, 0) != 0.0f);  // not vacuous
        }
}

}  // namespace

TEST_CASE("Q4_0 x Q8_0 tiles give the reference's bits on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_block32<BlockQ4_0, dot_q4_0_q8_0>(kernels_for(isa).for_weights(TensorType::Q4_0), TensorType::Q4_0, block_q4_0, 51);
    }
}

TEST_CASE("Q5_0 x Q8_0 tiles give the reference's bits on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_block32<BlockQ5_0, dot_q5_0_q8_0>(kernels_for(isa).for_weights(TensorType::Q5_0), TensorType::Q5_0, block_q5_0, 52);
    }
}

TEST_CASE("Q4_1 x Q8_0 tiles give the reference's bits on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_block32<BlockQ4_1, dot_q4_1_q8_0>(kernels_for(isa).for_weights(TensorType::Q4_1), TensorType::Q4_1, block_q4_1, 53);
    }
}

TEST_CASE("Q5_1 x Q8_0 tiles give the reference's bits on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_block32<BlockQ5_1, dot_q5_1_q8_0>(kernels_for(isa).for_weights(TensorType::Q5_1), TensorType::Q5_1, block_q5_1, 54);
    }
}

TEST_CASE("IQ4_NL x Q8_0 tiles give the reference's bits on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        check_block32<BlockIQ4NL, dot_iq4_nl_q8_0>(kernels_for(isa).for_weights(TensorType::IQ4_NL), TensorType::IQ4_NL,
                                                   block_iq4_nl, 55);
    }
}

#if SMOL_HAVE_AVX2_KERNELS
namespace {

// The AVX-VNNI set's block-of-32 products with vpdpbusd emulated.
using EmulatedVnniOps = kernels_avx2::legacy::VnniOps<EmulatedDot>;
template <class Kind>
constexpr DotTileFn emulated_vnni_tile =
    kernel_detail::by_columns<kernels_avx2::legacy::tile<Kind, EmulatedVnniOps, 1>,
                              kernels_avx2::legacy::tile<Kind, EmulatedVnniOps, kTileCols>>;

}  // namespace

TEST_CASE("the AVX-VNNI set's Q8_0 and block-of-32 tiles give the reference's bits with vpdpbusd emulated") {
    // As its GEMMs (above): the set runs only on CPUs with AVX-VNNI, its products run here.
    namespace legacy = kernels_avx2::legacy;
    using Q8Quads = kernels_avx2::detail::DpbusdQuads<EmulatedDot>;
    check_q8_0(kernel_detail::by_columns<kernels_avx2::detail::q8_0_tile<Q8Quads, 1>,
                                         kernels_avx2::detail::q8_0_tile<Q8Quads, kTileCols>>);
    check_block32<BlockQ4_0, dot_q4_0_q8_0>(emulated_vnni_tile<legacy::Q4_0Kind>, TensorType::Q4_0, block_q4_0, 151);
    check_block32<BlockQ5_0, dot_q5_0_q8_0>(emulated_vnni_tile<legacy::Q5_0Kind>, TensorType::Q5_0, block_q5_0, 152);
    check_block32<BlockQ4_1, dot_q4_1_q8_0>(emulated_vnni_tile<legacy::Q4_1Kind>, TensorType::Q4_1, block_q4_1, 153);
    check_block32<BlockQ5_1, dot_q5_1_q8_0>(emulated_vnni_tile<legacy::Q5_1Kind>, TensorType::Q5_1, block_q5_1, 154);
    check_block32<BlockIQ4NL, dot_iq4_nl_q8_0>(emulated_vnni_tile<legacy::IQ4NLKind>, TensorType::IQ4_NL, block_iq4_nl, 155);
}
#endif

TEST_CASE("F32, F16 and BF16 tiles match the reference on every kernel set") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        std::mt19937 rng(9);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (const TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
            CAPTURE(type_name(type));
            for (const std::int64_t n : {std::int64_t(7), std::int64_t(64), std::int64_t(100), std::int64_t(2051)}) {
                const std::size_t elem = traits_of(type).block_bytes;
                Operands ops;
                ops.row_bytes = std::size_t(n) * elem + 8;
                ops.act_stride = std::size_t(n) * sizeof(float) + 4;
                ops.weights.assign(kTileRows * ops.row_bytes, 0);
                ops.acts.assign(kTileCols * ops.act_stride, 0);
                for (int r = 0; r < kTileRows; ++r)
                    for (std::int64_t i = 0; i < n; ++i) {
                        std::uint8_t* p = ops.weights.data() + std::size_t(r) * ops.row_bytes + std::size_t(i) * elem;
                        const float v = dist(rng);
                        if (type == TensorType::F32) std::memcpy(p, &v, 4);
                        const std::uint16_t h = type == TensorType::F16 ? f32_to_fp16(v) : f32_to_bf16(v);
                        if (type != TensorType::F32) std::memcpy(p, &h, 2);
                    }
                for (int c = 0; c < kTileCols; ++c)
                    for (std::int64_t i = 0; i < n; ++i) {
                        const float v = dist(rng);
                        std::memcpy(ops.acts.data() + std::size_t(c) * ops.act_stride + std::size_t(i) * 4, &v, 4);
                    }
                const auto reference = [&](int r, int c) {
                    const std::uint8_t* w = ops.weights.data() + std::size_t(r) * ops.row_bytes;
                    const auto* x = reinterpret_cast<const float*>(ops.acts.data() + std::size_t(c) * ops.act_stride);
                    switch (type) {
                        case TensorType::F32: return dot_f32(n, reinterpret_cast<const float*>(w), x);
                        case TensorType::F16: return dot_f16(n, reinterpret_cast<const std::uint16_t*>(w), x);
                        default: return dot_bf16(n, reinterpret_cast<const std::uint16_t*>(w), x);
                    }
                };
                check_tiles(set.for_weights(type), n, ops, reference, 1e-5, type, TensorType::F32);
            }
        }
    }
}

namespace {

// Every set's quantizer into one activation format (Block, written by `reference` in the
// reference) against the reference's bytes, on rows of every scale with the cases that tell
// rounding modes and maxima apart.
template <class Block>
void check_quantizer(TensorType format, void (*reference)(const float*, Block*, std::int64_t)) {
    CAPTURE(type_name(format));
    std::mt19937 rng(21);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const std::int64_t n = 8 * QK_K;
    const std::size_t blocks = std::size_t(n) / traits_of(format).block_elements;
    std::vector<float> x(static_cast<std::size_t>(n));
    std::vector<Block> expected(blocks), got(blocks);
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        const FromFloatFn quantize = kernels_for(isa).quantizer(format);
        for (int trial = 0; trial < 50; ++trial) {
            const float sigma = std::pow(10.0f, float(trial % 9) - 4.0f);
            for (auto& v : x) v = sigma * dist(rng);
            switch (trial % 5) {
                case 1:  // max -127 so Q8_K's iscale and Q8_0's first scale are 1, then many exact ties k + 0.5
                    x[0] = -127.0f;
                    for (int i = 1; i < QK_K; ++i) x[std::size_t(i)] = float(int(rng() % 253) - 126) + 0.5f * float(rng() % 2);
                    break;
                case 2:  // the second 256 values all zero, the third a single positive value
                    std::fill(x.begin() + QK_K, x.begin() + 3 * QK_K, 0.0f);
                    x[2 * QK_K + 77] = 3.0f;
                    break;
                case 3:  // the largest magnitude twice with both signs: the first one sets the sign
                    x[5] = 9.0f * sigma;
                    x[9] = -9.0f * sigma;
                    x[QK_K + 200] = -9.0f * sigma;
                    x[QK_K + 201] = 9.0f * sigma;
                    break;
                case 4:  // the maximum in the last element
                    x[QK_K - 1] = -50.0f * sigma;
                    break;
                default: break;
            }
            reference(x.data(), expected.data(), n);
            std::memset(got.data(), 0x5a, got.size() * sizeof(Block));
            quantize(x.data(), got.data(), n);
            for (std::size_t b = 0; b < blocks; ++b) {
                INFO("trial " << trial << " block " << b);
                REQUIRE(std::memcmp(&got[b], &expected[b], sizeof(Block)) == 0);
            }
        }
    }
}

}  // namespace

TEST_CASE("Q8_K and Q8_0 activation quantizers are byte-identical to the reference on every kernel set") {
    check_quantizer<BlockQ8K>(TensorType::Q8_K, quantize_row_q8_k);
    check_quantizer<BlockQ8_0>(TensorType::Q8_0, quantize_row_q8_0);
}

TEST_CASE("the type table has one row per type, geometry as ggml's, a tile for every weight type in every compiled set") {
    for (const TypeRow& row : kTypeTable) {
        CAPTURE(type_name(row.type));
        CHECK(row.block_elements == traits_of(row.type).block_elements);
        CHECK(row.block_bytes == traits_of(row.type).block_bytes);
        CHECK((row.to_float != nullptr));
        CHECK(find_type_row(row.type) == &row);
        for (const Isa isa : kAllIsas) {
            CAPTURE(isa_name(isa));
            // Every x86 set has every weight type's tile of its own; an ARM set has those of some
            // types and runs the rest with the set it falls back on. No column holds a kernel of a
            // set this build lacks.
            if (row.is_weight()) {
                if (isa <= Isa::amx) CHECK((row.tiles[std::size_t(isa)] != nullptr) == isa_compiled(isa));
                else CHECK((row.tiles[std::size_t(isa)] == nullptr || isa_compiled(isa)));
                if (isa_compiled(isa)) CHECK((KernelSet{isa}.for_weights(row.type) != nullptr));
            }
            // A quantizer in every column or in none (the types smol reads but never writes).
            CHECK((row.from_float[std::size_t(isa)] != nullptr) == (row.from_float[0] != nullptr));
        }
        const bool read_only = row.type == TensorType::IQ4_NL || row.type == TensorType::IQ4_XS;
        CHECK((row.from_float[0] == nullptr) == read_only);
        if (row.is_weight()) CHECK(find_type_row(row.activations) != nullptr);  // its activations have a row too
    }
    CHECK(find_type_row(TensorType::IQ2_XXS) == nullptr);
    CHECK_FALSE(is_weight_type(TensorType::Q8_K));
    CHECK(supported_weight_types() == "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS, F32, F16, BF16");
    CHECK(supported_weight_types(true) == "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, F32, F16, BF16");
    CHECK_THROWS_WITH_AS(quantize_row(TensorType::IQ4_NL, nullptr, nullptr, 32), doctest::Contains("smol cannot write IQ4_NL"),
                         smol::Error);
    // Every k-quant has prompt GEMMs in the AVX2, AVX-VNNI and AVX-512 sets (the GEMM test skips a missing one).
    for (const TensorType type : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K})
        for (const Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512}) {
            CAPTURE(type_name(type));
            CAPTURE(isa_name(isa));
            CHECK((weight_row(type).gemms[std::size_t(isa)] != nullptr) == isa_compiled(isa));
        }
    // Every integer weight type has kernels of its own in the neon and dotprod sets.
    for (const TensorType type : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                                  TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_1,
                                  TensorType::IQ4_NL, TensorType::IQ4_XS})
        for (const Isa isa : {Isa::neon, Isa::dotprod}) {
            CAPTURE(type_name(type));
            CAPTURE(isa_name(isa));
            CHECK((weight_row(type).tiles[std::size_t(isa)] != nullptr) == isa_compiled(isa));
        }
    // The float types have one NEON tile (XsimdFloats), which dotprod and i8mm fall back to.
    for (const TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        CAPTURE(type_name(type));
        CHECK((weight_row(type).tiles[std::size_t(Isa::neon)] != nullptr) == isa_compiled(Isa::neon));
        CHECK((weight_row(type).tiles[std::size_t(Isa::dotprod)] == nullptr));
        if (isa_compiled(Isa::dotprod))
            CHECK((KernelSet{Isa::dotprod}.for_weights(type) == weight_row(type).tiles[std::size_t(Isa::neon)]));
    }
    // The k-quants of SmolLM3's files also have tiles of their own in the i8mm set; IQ4_XS decodes
    // with the dotprod set's tiles there.
    for (const TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
        CAPTURE(type_name(type));
        for (const Isa isa : {Isa::neon, Isa::dotprod, Isa::i8mm}) {
            CAPTURE(isa_name(isa));
            CHECK((weight_row(type).tiles[std::size_t(isa)] != nullptr) == isa_compiled(isa));
        }
    }
    CHECK((weight_row(TensorType::IQ4_XS).tiles[std::size_t(Isa::i8mm)] == nullptr));
    if (isa_compiled(Isa::i8mm))
        CHECK((KernelSet{Isa::i8mm}.for_weights(TensorType::IQ4_XS) ==
               weight_row(TensorType::IQ4_XS).tiles[std::size_t(Isa::dotprod)]));
    // Q4_K, Q6_K and IQ4_XS have prompt GEMMs in the dotprod set, which the i8mm set runs too (they
    // take fewer instructions than its tiles).
    for (const TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::IQ4_XS}) {
        CAPTURE(type_name(type));
        const GemmTileFn dotprod_gemm = weight_row(type).gemms[std::size_t(Isa::dotprod)];
        CHECK((dotprod_gemm != nullptr) == isa_compiled(Isa::dotprod));
        CHECK((weight_row(type).gemms[std::size_t(Isa::neon)] == nullptr));
        CHECK((weight_row(type).gemms[std::size_t(Isa::i8mm)] == nullptr));
        if (isa_compiled(Isa::i8mm))
            CHECK((KernelSet{Isa::i8mm}.gemm_for_weights(type, kGemmShapes[int(Isa::i8mm)].tokens).fn == dotprod_gemm));
    }
    CHECK(weight_row(TensorType::Q6_K).activations == TensorType::Q8_K);
    CHECK(weight_row(TensorType::Q8_0).activations == TensorType::Q8_0);
    for (const TensorType block32 : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_1, TensorType::IQ4_NL})
        CHECK(weight_row(block32).activations == TensorType::Q8_0);
    CHECK(weight_row(TensorType::IQ4_XS).activations == TensorType::Q8_K);
    CHECK(weight_row(TensorType::BF16).activations == TensorType::F32);
    CHECK_THROWS_AS(weight_row(TensorType::Q8_K), smol::Error);
    CHECK_THROWS_AS(dequantize_row(TensorType::IQ2_XXS, nullptr, nullptr, 256), smol::Error);
}

// A set's GEMM with its first result one ulp off: what a miscompiled or misbehaving set looks like.
template <TensorType Type, Isa Set>
void gemm_one_ulp_off(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                      const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    weight_row(Type).gemms[std::size_t(Set)](n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
    out[0] = std::nextafter(out[0], 1e30f);
}

// The same for a set's row-group GEMM: the first result of the half from row 4 one ulp off.
template <TensorType Type, Isa Set>
void group_gemm_one_ulp_off(std::int64_t n, const std::uint8_t* group, int first_row, const BlockQ8Kx16* acts,
                            int n_tokens, float* out, std::size_t out_stride) {
    weight_row(Type).row_groups.gemms[std::size_t(Set)](n, group, first_row, acts, n_tokens, out, out_stride);
    if (first_row != 0) out[0] = std::nextafter(out[0], 1e30f);
}

TEST_CASE("the GEMM self-check (run before the AMX and AVX-VNNI sets' first use) passes every runnable set and catches one wrong bit") {
    for (const Isa isa : kAllIsas) {
        if (!runnable(isa)) continue;
        CAPTURE(isa_name(isa));
        CHECK(gemm_self_check(isa) == "");
    }
    if (runnable(Isa::avx2)) {
        const std::string found =
            gemm_disagreement(TensorType::Q4_K, {gemm_one_ulp_off<TensorType::Q4_K, Isa::avx2>, kGemmShapes[1], nullptr});
        CHECK(found.find("Q4_K row 0 token 0: expected ") == 0);
        const KernelSet::Gemm off_in_groups{weight_row(TensorType::Q6_K).gemms[1], kGemmShapes[1],
                                            group_gemm_one_ulp_off<TensorType::Q6_K, Isa::avx2>};
        CHECK(gemm_disagreement(TensorType::Q6_K, off_in_groups).find("Q6_K (row groups) row 4 token 0: expected ") == 0);
    }
    // IQ4_XS has no quantizer: the check makes its blocks from random bytes, and still sees one bit.
    if (runnable(Isa::dotprod)) {
        const std::string found = gemm_disagreement(
            TensorType::IQ4_XS,
            {gemm_one_ulp_off<TensorType::IQ4_XS, Isa::dotprod>, kGemmShapes[int(Isa::dotprod)], nullptr});
        CHECK(found.find("IQ4_XS row 0 token 0: expected ") == 0);
    }
#if SMOL_HAVE_AVX2_KERNELS
    // The AVX-VNNI GEMMs with vpdpbusd emulated pass; with its operands swapped (activations read
    // as unsigned: the likeliest way to get the instruction wrong) they are caught.
    using namespace kernels_avx2::kquant_detail;
    const GemmShape vnni_shape = kGemmShapes[int(Isa::avx_vnni)];
    CHECK(gemm_disagreement(TensorType::Q4_K, {dpbusd_gemm<Q4KGemm, EmulatedDot>, vnni_shape,
                                               dpbusd_group_gemm<Q4KGemm, EmulatedDot>}) == "");
    CHECK(gemm_disagreement(TensorType::Q6_K, {dpbusd_gemm<Q6KGemm, EmulatedDot>, vnni_shape,
                                               dpbusd_group_gemm<Q6KGemm, EmulatedDot>}) == "");
    CHECK(gemm_disagreement(TensorType::IQ4_XS, {dpbusd_gemm<IQ4XSGemm, EmulatedDot>, vnni_shape, nullptr}) == "");
    CHECK(gemm_disagreement(TensorType::IQ4_XS, {dpbusd_gemm<IQ4XSGemm, SwappedEmulatedDot>, vnni_shape, nullptr}) != "");
    CHECK(gemm_disagreement(TensorType::Q4_K, {dpbusd_gemm<Q4KGemm, SwappedEmulatedDot>, vnni_shape, nullptr}) != "");
    CHECK(gemm_disagreement(TensorType::Q6_K, {dpbusd_gemm<Q6KGemm, EmulatedDot>, vnni_shape,
                                               dpbusd_group_gemm<Q6KGemm, SwappedEmulatedDot>}) != "");
#endif
}

TEST_CASE("kernel selection") {
    const CpuFeatures& cpu = cpu_features();
    MESSAGE("CPU: ", describe());
    CHECK(cpu.supports(Isa::scalar));
#if SMOL_X86
    // This project's x86 baseline is x86-64-v3, so a CPU running the tests at all has the AVX2 set.
    CHECK(cpu.has_avx2_kernels());
#elif SMOL_AARCH64
    CHECK(cpu.neon);  // every AArch64 core has Advanced SIMD
    CHECK(cpu.best_isa() >= Isa::neon);
#endif
    // The set that runs: the selected one, or the first down its fallback chain this build has.
    Isa expected = selected_isa();
    while (!isa_compiled(expected)) expected = fallback_isa(expected);
    CHECK(kernels().isa == expected);
    MESSAGE("kernel set running: ", isa_name(kernels().isa));
    CHECK(parse_isa("neon") == Isa::neon);
    CHECK(parse_isa("dotprod") == Isa::dotprod);
    CHECK(parse_isa("i8mm") == Isa::i8mm);
    CHECK(parse_isa("avx2") == Isa::avx2);
    CHECK_THROWS_AS(parse_isa("sse9"), smol::Error);
    CHECK(parse_isa("amx") == Isa::amx);
    if (!cpu.has_avx512_kernels()) CHECK_THROWS_AS(kernels_for(Isa::avx512), smol::Error);
    if (!cpu.has_amx_kernels()) CHECK_THROWS_AS(kernels_for(Isa::amx), smol::Error);
    // AMX tiles only with the OS's permission; a CPU without them is never asked.
    if (!cpu.amx_tile) CHECK_FALSE(cpu.amx_permitted);
    CHECK(cpu.has_amx_kernels() == (cpu.best_isa() == Isa::amx));
    CHECK_THROWS_AS(kernels_for(Isa::scalar).for_weights(TensorType::IQ2_XXS), smol::Error);
    CHECK(parse_isa("avx_vnni") == Isa::avx_vnni);
    CHECK(cpu.supports(Isa::avx_vnni) == (cpu.has_avx2_kernels() && cpu.avx_vnni));
    if (!cpu.supports(Isa::avx_vnni)) CHECK_THROWS_AS(kernels_for(Isa::avx_vnni), smol::Error);
}

TEST_CASE("kernel sets form a tree: AVX-VNNI and AVX-512 each need AVX2, not each other") {
    CHECK(fallback_isa(Isa::amx) == Isa::avx512);
    CHECK(fallback_isa(Isa::avx512) == Isa::avx2);
    CHECK(fallback_isa(Isa::avx_vnni) == Isa::avx2);
    CHECK(fallback_isa(Isa::avx2) == Isa::scalar);
    CpuFeatures haswell;  // AVX2 only (and Zen 2, Zen 3)
    haswell.avx2 = haswell.fma = haswell.f16c = true;
    CHECK(haswell.best_isa() == Isa::avx2);
    CHECK_FALSE(haswell.supports(Isa::avx_vnni));
    CpuFeatures alder_lake = haswell;  // AVX-VNNI, no AVX-512
    alder_lake.avx_vnni = true;
    CHECK(alder_lake.best_isa() == Isa::avx_vnni);
    CHECK(alder_lake.supports(Isa::avx2));
    CHECK_FALSE(alder_lake.supports(Isa::avx512));
    CpuFeatures ice_lake = haswell;  // AVX-512 with its VNNI, no AVX-VNNI (Zen 4 too)
    ice_lake.avx512f = ice_lake.avx512bw = ice_lake.avx512vl = ice_lake.avx512dq = ice_lake.avx512_vnni = true;
    CHECK(ice_lake.best_isa() == Isa::avx512);
    CHECK_FALSE(ice_lake.supports(Isa::avx_vnni));
    CpuFeatures sapphire_rapids = ice_lake;  // both, and AMX
    sapphire_rapids.avx_vnni = sapphire_rapids.amx_tile = sapphire_rapids.amx_int8 = sapphire_rapids.amx_permitted = true;
    CHECK(sapphire_rapids.best_isa() == Isa::amx);
    for (const Isa isa : kAllIsas) CHECK(sapphire_rapids.supports(isa) == (isa <= Isa::amx));
    sapphire_rapids.amx_permitted = false;  // the OS refused tile state
    CHECK(sapphire_rapids.best_isa() == Isa::avx512);
}

TEST_CASE("the ARM kernel sets form a line: i8mm needs dotprod, dotprod needs neon") {
    CHECK(fallback_isa(Isa::i8mm) == Isa::dotprod);
    CHECK(fallback_isa(Isa::dotprod) == Isa::neon);
    CHECK(fallback_isa(Isa::neon) == Isa::scalar);
    CpuFeatures cortex_a53;  // Armv8.0
    cortex_a53.neon = true;
    CHECK(cortex_a53.best_isa() == Isa::neon);
    CHECK_FALSE(cortex_a53.supports(Isa::dotprod));
    CpuFeatures cortex_a76 = cortex_a53;  // Armv8.2 with sdot
    cortex_a76.dotprod = true;
    CHECK(cortex_a76.best_isa() == Isa::dotprod);
    CHECK_FALSE(cortex_a76.supports(Isa::i8mm));
    CpuFeatures neoverse_v1 = cortex_a76;  // Armv8.4 with i8mm
    neoverse_v1.i8mm = true;
    CHECK(neoverse_v1.best_isa() == Isa::i8mm);
    CHECK(neoverse_v1.supports(Isa::neon));
    for (const Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512, Isa::amx}) CHECK_FALSE(neoverse_v1.supports(isa));
    CpuFeatures i8mm_without_dotprod = cortex_a53;  // no such core; the set would run sdot
    i8mm_without_dotprod.i8mm = true;
    CHECK(i8mm_without_dotprod.best_isa() == Isa::neon);
}

TEST_CASE("a set without a type's prompt GEMM hands prompts to the first set down its fallback chain that has one") {
    // Choosing a GEMM runs no kernel, so every compiled set's choice is checked on any CPU.
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set{isa};
        for (const TypeRow& row : kTypeTable) {
            if (!is_weight_type(row.type)) continue;
            CAPTURE(type_name(row.type));
            // The first set from `isa` down its fallback chain with a GEMM for this type, and what a
            // batch of that set's width gets: that GEMM, with its set's shape.
            Isa expected = isa;
            while (expected != Isa::scalar && row.gemms[std::size_t(expected)] == nullptr) expected = fallback_isa(expected);
            const std::int64_t batch = kGemmShapes[std::size_t(isa)].tokens;
            const KernelSet::Gemm gemm = set.gemm_for_weights(row.type, batch);
            CHECK((gemm.fn == row.gemms[std::size_t(expected)]));
            if (gemm.fn != nullptr) CHECK(gemm.shape.tokens == kGemmShapes[std::size_t(expected)].tokens);
            // A few tokens (a speculative verify step) go through the tiles: no GEMM.
            CHECK((set.gemm_for_weights(row.type, kMinGemmTokens - 1).fn == nullptr));
        }
    }
    // Q8_0 has no GEMM in any set: the AVX-VNNI set's prompts go through its tiles (vpdpbusd);
    // float weights through AVX2's.
    CHECK((KernelSet{Isa::avx_vnni}.gemm_for_weights(TensorType::Q8_0, 512).fn == nullptr));
    if (isa_compiled(Isa::avx_vnni)) {
        CHECK((KernelSet{Isa::avx_vnni}.for_weights(TensorType::Q8_0) != weight_row(TensorType::Q8_0).tiles[int(Isa::avx2)]));
        CHECK((KernelSet{Isa::avx_vnni}.for_weights(TensorType::F16) == weight_row(TensorType::F16).tiles[int(Isa::avx2)]));
    }
#if SMOL_HAVE_AMX_KERNELS
    // The case that asked for it: AMX has Q4_K and Q6_K GEMMs only, so Q5_K prompts take AVX-512's.
    if (weight_row(TensorType::Q5_K).gemms[std::size_t(Isa::amx)] == nullptr)
        CHECK((KernelSet{Isa::amx}.gemm_for_weights(TensorType::Q5_K, 512).fn ==
               weight_row(TensorType::Q5_K).gemms[std::size_t(Isa::avx512)]));
#endif
}

}  // namespace test_quant_kernels
