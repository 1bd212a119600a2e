// matmul against a naive reference (weights dequantized to float, activations quantized with the
// reference quantizer and dequantized, dot products in double), for every weight type, several
// shapes, 1 and many tokens, 1 and 2 threads, on every kernel set this CPU runs.

#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "smol/core/cpu.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/quant/reference.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_matmul {

using namespace smol;

namespace {

struct Matrix {
    TensorType type;
    std::int64_t rows, cols;
    std::size_t row_bytes;
    std::vector<std::uint8_t> data;
    MatrixView view() const { return {type, data.data(), rows, cols, row_bytes}; }
};

Matrix random_matrix(TensorType type, std::int64_t rows, std::int64_t cols, std::size_t padding, std::uint32_t seed) {
    const auto traits = traits_of(type);
    Matrix m{type, rows, cols, std::size_t(cols) / traits.block_elements * traits.block_bytes + padding, {}};
    m.data.assign(std::size_t(rows) * m.row_bytes, 0xee);
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = dist(rng);
        quantize_row(type, row.data(), m.data.data() + std::size_t(r) * m.row_bytes, cols);
    }
    return m;
}

// The activations as the kernels see them: quantized by the reference quantizer for quantized
// weights, untouched for float weights.
std::vector<float> effective_activations(TensorType wtype, const std::vector<float>& x, std::int64_t cols) {
    std::vector<float> out(x.size());
    const std::int64_t tokens = std::int64_t(x.size()) / cols;
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* xt = x.data() + t * cols;
        float* ot = out.data() + t * cols;
        // The activation format's own row quantizes (with the reference) and dequantizes.
        const TensorType format = weight_row(wtype).activations;
        if (format == TensorType::F32) {
            std::memcpy(ot, xt, std::size_t(cols) * sizeof(float));
        } else {
            const auto traits = traits_of(format);
            std::vector<std::uint8_t> q(std::size_t(cols) / traits.block_elements * traits.block_bytes);
            quantize_row(format, xt, q.data(), cols);
            dequantize_row(format, q.data(), ot, cols);
        }
    }
    return out;
}

struct Expected {
    std::vector<double> y;          // [tokens, rows]
    std::vector<double> magnitude;  // [tokens, rows] sum |w x|, the scale of rounding differences
};

Expected naive_matmul(const Matrix& w, const std::vector<float>& x, std::int64_t tokens) {
    const auto xe = effective_activations(w.type, x, w.cols);
    Expected e{std::vector<double>(std::size_t(tokens * w.rows)), std::vector<double>(std::size_t(tokens * w.rows))};
    std::vector<float> wr(std::size_t(w.cols));
    for (std::int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w.type, w.data.data() + std::size_t(r) * w.row_bytes, wr.data(), w.cols);
        for (std::int64_t t = 0; t < tokens; ++t) {
            double s = 0, m = 0;
            for (std::int64_t c = 0; c < w.cols; ++c) {
                s += double(wr[std::size_t(c)]) * xe[std::size_t(t * w.cols + c)];
                m += std::abs(double(wr[std::size_t(c)]) * xe[std::size_t(t * w.cols + c)]);
            }
            e.y[std::size_t(t * w.rows + r)] = s;
            e.magnitude[std::size_t(t * w.rows + r)] = m;
        }
    }
    return e;
}

std::vector<float> random_activations(std::int64_t tokens, std::int64_t cols, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(std::size_t(tokens * cols));
    for (auto& v : x) v = dist(rng);
    return x;
}

// A matrix regrouped into row groups, as the loader holds Q4_K and Q6_K, with its rows as stored
// garbled: they must never be read.
struct Grouped {
    MatrixView view;
    AlignedBuffer groups;
    std::vector<std::uint8_t> garbled;
};
Grouped grouped(const Matrix& m) {
    Grouped g{m.view(), AlignedBuffer(std::size_t(m.rows / kGroupRows) * m.view().group_bytes()), {}};
    for (std::int64_t i = 0; i < m.rows / kGroupRows; ++i)
        weight_row(m.type).row_groups.interleave(m.data.data() + std::size_t(i * kGroupRows) * m.row_bytes, m.row_bytes,
                                                 m.cols / QK_K, g.groups.data() + std::size_t(i) * g.view.group_bytes());
    g.view.groups = g.groups.data();
    for (const std::uint8_t byte : m.data) g.garbled.push_back(std::uint8_t(~byte));
    g.view.data = g.garbled.data();
    return g;
}

struct ThreadCount {  // restores the OpenMP thread count on scope exit
    int saved = omp_get_max_threads();
    explicit ThreadCount(int n) { omp_set_num_threads(n); }
    ~ThreadCount() { omp_set_num_threads(saved); }
};

}  // namespace

TEST_CASE("matmul matches the naive reference for every type, shape, token count and thread count") {
    struct Shape {
        std::int64_t rows, cols;
        std::size_t padding;
    };
    const Shape shapes[] = {{1, 256, 0}, {5, 512, 0}, {37, 1280, 16}, {64, 768, 0}};
    const TensorType types[] = {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0,
                                TensorType::Q4_1, TensorType::Q5_1, TensorType::F32,  TensorType::F16,
                                TensorType::BF16};
    const std::int64_t token_counts[] = {1, 2, 5, 70};  // 70 crosses a 64-token block
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) {
            MESSAGE("skipping kernel set ", isa_name(isa), ": ", std::string(isa_compiled(isa) ? "this CPU lacks it" : "not compiled"));
            continue;
        }
        const KernelSet set = kernels_for(isa);
        std::uint32_t seed = 1;
        for (const TensorType type : types)
            for (const Shape& shape : shapes) {
                const Matrix w = random_matrix(type, shape.rows, shape.cols, shape.padding, seed++);
                for (const std::int64_t tokens : token_counts) {
                    const auto x = random_activations(tokens, shape.cols, seed++);
                    const Expected expected = naive_matmul(w, x, tokens);
                    std::vector<float> first;
                    for (const int threads : {1, 2}) {
                        CAPTURE(isa_name(isa));
                        CAPTURE(type_name(type));
                        CAPTURE(shape.rows);
                        CAPTURE(shape.cols);
                        CAPTURE(tokens);
                        CAPTURE(threads);
                        ThreadCount scope(threads);
                        MatmulScratch scratch;
                        std::vector<float> y(std::size_t(tokens * shape.rows), std::nanf(""));
                        matmul(set, w.view(), x.data(), tokens, y.data(), scratch);
                        for (std::size_t i = 0; i < y.size(); ++i) {
                            INFO("output " << i);
                            REQUIRE(std::abs(y[i] - expected.y[i]) <= 1e-5 * expected.magnitude[i] + 1e-30);
                        }
                        // Each output is computed by one tile call whatever the thread count.
                        if (threads == 1) first = y;
                        else REQUIRE(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
                    }
                }
            }
    }
}

TEST_CASE("a token's quantized outputs are the same bits alone, in any batch and on every kernel set") {
    // The server batches several users' decode steps; each must get the logits it would get
    // alone, and a model's logits must not depend on the CPU's kernel set.
    const std::int64_t rows = 37, cols = 1280, tokens = 70;
    std::uint32_t seed = 101;
    for (const TensorType type : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                                  TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_1}) {
        CAPTURE(type_name(type));
        const Matrix w = random_matrix(type, rows, cols, 16, seed++);
        const auto x = random_activations(tokens, cols, seed++);
        std::vector<float> first_set;
        for (const Isa isa : kAllIsas) {
            if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
            CAPTURE(isa_name(isa));
            const KernelSet set = kernels_for(isa);
            MatmulScratch scratch;
            std::vector<float> batch(std::size_t(tokens * rows));
            matmul(set, w.view(), x.data(), tokens, batch.data(), scratch);
            for (const std::int64_t t : {std::int64_t(0), std::int64_t(17), std::int64_t(69)}) {
                CAPTURE(t);
                std::vector<float> alone(static_cast<std::size_t>(rows));
                matmul(set, w.view(), x.data() + t * cols, 1, alone.data(), scratch);
                REQUIRE(std::memcmp(alone.data(), batch.data() + t * rows, alone.size() * sizeof(float)) == 0);
            }
            if (first_set.empty()) first_set = batch;
            else REQUIRE(std::memcmp(first_set.data(), batch.data(), batch.size() * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("matrices read as row groups give the bits of their rows as stored: every batch, set and thread count") {
    // Decode reads the groups, and prompts read them through group GEMMs or restore rows from them;
    // none of it may change a bit, alone or fused with a matrix read as stored.
    const std::int64_t cols = 1280;
    const Matrix q4 = random_matrix(TensorType::Q4_K, 48, cols, 16, 301);  // padded rows
    const Matrix q6 = random_matrix(TensorType::Q6_K, 40, cols, 0, 302);
    const Matrix q5 = random_matrix(TensorType::Q5_K, 37, cols, 0, 303);  // no row groups: read as stored
    const Grouped g4 = grouped(q4), g6 = grouped(q6);
    const auto x = random_activations(130, cols, 304);
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        for (const int threads : {1, 2}) {
            CAPTURE(threads);
            const ThreadCount scope(threads);
            for (const std::int64_t tokens : {1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 70, 130}) {
                CAPTURE(tokens);
                const MatrixView v4 = q4.view(), v6 = q6.view(), v5 = q5.view();
                std::vector<float> want(std::size_t(tokens * (q4.rows + q6.rows + q5.rows))), got(want.size());
                float* const w4 = want.data();
                float* const w6 = w4 + tokens * q4.rows;
                float* const w5 = w6 + tokens * q6.rows;
                const MatmulTarget plain[] = {{&v4, w4}, {&v6, w6}, {&v5, w5}};
                const MatmulTarget mixed[] = {{&g4.view, got.data() + (w4 - want.data())},
                                              {&g6.view, got.data() + (w6 - want.data())},
                                              {&v5, got.data() + (w5 - want.data())}};
                MatmulScratch scratch;
                matmul(set, plain, x.data(), tokens, scratch);
                matmul(set, mixed, x.data(), tokens, scratch);
                REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
                // Q5_K first: on AMX its GEMM is AVX-512's, narrower than the AMX GEMMs of the
                // others, and each target keeps its own call shape.
                std::fill(got.begin(), got.end(), 0.0f);
                const MatmulTarget fallback_first[] = {{&v5, got.data() + (w5 - want.data())},
                                                       {&g4.view, got.data() + (w4 - want.data())},
                                                       {&v6, got.data() + (w6 - want.data())}};
                matmul(set, fallback_first, x.data(), tokens, scratch);
                REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
            }
        }
    }
    MatrixView ragged = g4.view;
    ragged.rows = 44;  // not a whole number of groups
    std::vector<float> y(44);
    MatmulScratch scratch;
    CHECK_THROWS_WITH_AS(matmul(ragged, x.data(), 1, y.data(), scratch),
                         "matmul: a matrix read as row groups needs a multiple of 8 rows, found 44", smol::Error);
}

TEST_CASE("wide inputs take half token blocks, with every token's bits unchanged") {
    // Every work item reads its token block's packed activations again, so a block whose
    // activations outgrow three quarters of L2 is halved once (token_block_for).
    using matmul_detail::token_block_for;
    const std::size_t mib = std::size_t(1) << 20;
    CHECK(token_block_for(96, 2048, mib) == 96);      // AVX-512, the 3B model's 2048 columns: 286 KB
    CHECK(token_block_for(96, 11008, mib) == 48);     // ffn_down's input: 1.5 MB at 96 tokens
    CHECK(token_block_for(96, 11008, 2 * mib) == 96);
    CHECK(token_block_for(64, 11008, mib) == 32);     // AVX2
    CHECK(token_block_for(64, 11008, 2 * mib) == 64);  // AMX on a Xeon's 2 MiB L2: 1 MB
    CHECK(token_block_for(32, 11008, mib) == 32);     // the ARM GEMMs: two calls of 32, then one
    CHECK(token_block_for(16, 11008, mib / 4) == 32);  // halved once, not down to single calls

    // 45 blocks: 1.5 MB at 96 tokens, over three quarters of a 2 MiB L2 as of a 1 MiB one, so the
    // blocks halve on most machines that run this.
    const std::int64_t cols = 45 * QK_K, tokens = 130;
    const Matrix q4 = random_matrix(TensorType::Q4_K, 16, cols, 0, 311);
    const Matrix q6 = random_matrix(TensorType::Q6_K, 16, cols, 0, 312);
    const Grouped g4 = grouped(q4);
    const auto x = random_activations(tokens, cols, 313);
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        const MatrixView v4 = q4.view(), v6 = q6.view();
        for (const MatrixView* view : {&v4, &g4.view, &v6}) {
            CAPTURE(type_name(view->type));
            const MatmulTarget target{view, nullptr};
            const matmul_detail::MatmulPlan plan = matmul_detail::plan_matmul(set, std::span(&target, 1), tokens);
            if (plan.use_gemm)
                CHECK(plan.token_block ==
                      token_block_for(plan.gemm_shapes[0].tokens, cols, matmul_detail::l2_bytes_here()));
            MatmulScratch scratch;
            std::vector<float> batch(std::size_t(tokens * view->rows)), alone(std::size_t(view->rows));
            matmul(set, *view, x.data(), tokens, batch.data(), scratch);
            for (std::int64_t t = 0; t < tokens; ++t) {
                CAPTURE(t);
                matmul(set, *view, x.data() + t * cols, 1, alone.data(), scratch);
                REQUIRE(std::memcmp(alone.data(), batch.data() + t * view->rows, alone.size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("matmul_gated gives the bits of swiglu over the two matmuls: every pairing, batch, set and thread count") {
    // The MLP's gate and up projections in one pass where GEMMs run, each item computing its rows
    // of both: row groups and rows as stored, side by side, and partial items. Apart otherwise: a
    // decode step's tiles and row groups, float weights, and formats that cannot share
    // activations (two matmuls then).
    const std::int64_t cols = 512;
    const Matrix q4 = random_matrix(TensorType::Q4_K, 40, cols, 16, 401), q4_up = random_matrix(TensorType::Q4_K, 40, cols, 0, 402);
    const Matrix q6 = random_matrix(TensorType::Q6_K, 40, cols, 0, 403), q5 = random_matrix(TensorType::Q5_K, 40, cols, 0, 404);
    const Matrix q8 = random_matrix(TensorType::Q8_0, 37, cols, 0, 405), q40 = random_matrix(TensorType::Q4_0, 37, cols, 0, 406);
    const Matrix q3 = random_matrix(TensorType::Q3_K, 37, cols, 0, 407), f16 = random_matrix(TensorType::F16, 37, cols, 0, 408);
    const Matrix f32 = random_matrix(TensorType::F32, 37, cols, 0, 409);
    const Grouped g4 = grouped(q4), g4_up = grouped(q4_up), g6 = grouped(q6);
    const MatrixView v4 = q4.view(), v5 = q5.view(), v8 = q8.view(), v40 = q40.view(), v3 = q3.view(), v16 = f16.view(),
                     v32 = f32.view();
    struct Pair {
        const char* name;
        const MatrixView *gate, *up;
    };
    const Pair pairs[] = {{"Q4_K groups, Q4_K groups", &g4.view, &g4_up.view}, {"Q4_K groups, Q5_K", &g4.view, &v5},
                          {"Q5_K, Q6_K groups", &v5, &g6.view},                {"Q4_K, Q6_K groups", &v4, &g6.view},
                          {"Q8_0, Q4_0", &v8, &v40},                           {"F16, F32", &v16, &v32},
                          {"Q3_K, Q8_0 (formats differ)", &v3, &v8}};
    const auto x = random_activations(130, cols, 410);
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        for (const Pair& pair : pairs) {
            CAPTURE(pair.name);
            const std::int64_t rows = pair.gate->rows;
            for (const int threads : {1, 2}) {
                CAPTURE(threads);
                const ThreadCount scope(threads);
                for (const std::int64_t tokens : {1, 2, 5, 16, 33, 130}) {
                    CAPTURE(tokens);
                    std::vector<float> gate(std::size_t(tokens * rows)), up(gate.size()), want(gate.size()), got(gate.size());
                    MatmulScratch scratch;
                    matmul(set, *pair.gate, x.data(), tokens, gate.data(), scratch);
                    matmul(set, *pair.up, x.data(), tokens, up.data(), scratch);
                    swiglu_scalar(gate.data(), up.data(), want.data(), std::int64_t(want.size()));
                    matmul_gated(set, *pair.gate, *pair.up, x.data(), tokens, got.data(), scratch);
                    REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
                }
            }
        }
    }
    std::vector<float> h(40);
    MatmulScratch scratch;
    for (const MatrixView* short_up : {&v3, &v8}) {  // 37 rows against 40: sharing the activations, and not
        CHECK_THROWS_WITH_AS(matmul_gated(g4.view, *short_up, x.data(), 1, h.data(), scratch),
                             "matmul_gated: the gate and up projections must have the same rows, found 40 and 37",
                             smol::Error);
    }
}

TEST_CASE("matmul_add gives the bits of y[i] += (W x)[i]: every type path, batch, set and thread count") {
    // With GEMMs each item adds its results as it writes them back (whole items, a partial one,
    // several token blocks); without them (a decode step, float and Q8_0 weights) the product is
    // computed apart and added.
    const std::int64_t cols = 512;
    const Matrix q4 = random_matrix(TensorType::Q4_K, 40, cols, 16, 501), q6 = random_matrix(TensorType::Q6_K, 40, cols, 0, 502);
    const Matrix q8 = random_matrix(TensorType::Q8_0, 37, cols, 0, 503), f32 = random_matrix(TensorType::F32, 37, cols, 0, 504);
    const Grouped g6 = grouped(q6);
    const MatrixView v4 = q4.view(), v8 = q8.view(), v32 = f32.view();
    const auto x = random_activations(130, cols, 505);
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        for (const MatrixView* view : {&v4, &g6.view, &v8, &v32}) {
            CAPTURE(type_name(view->type));
            for (const int threads : {1, 2}) {
                CAPTURE(threads);
                const ThreadCount scope(threads);
                for (const std::int64_t tokens : {1, 3, 16, 130}) {
                    CAPTURE(tokens);
                    const auto residual = random_activations(tokens, view->rows, 506);
                    std::vector<float> product(residual.size()), want(residual), got(residual);
                    MatmulScratch scratch;
                    matmul(set, *view, x.data(), tokens, product.data(), scratch);
                    for (std::size_t i = 0; i < want.size(); ++i) want[i] += product[i];
                    matmul_add(set, *view, x.data(), tokens, got.data(), scratch);
                    REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
                }
            }
        }
    }
}

TEST_CASE("matmul_mlp_add gives the bits of matmul_gated then matmul_add, h handed on packed or as floats") {
    // The gated items hand h to the down projection quantized and packed where both run GEMMs
    // (forced here at any number of items, and at the team's minimum), or h goes through memory
    // as floats: a decode step, too few items, float weights. 512 rows of h are two Q8_K blocks,
    // so two items; 130 tokens make two token blocks and a partial token group.
    const std::int64_t cols = 512, rows = 512;
    const Matrix gate = random_matrix(TensorType::Q4_K, rows, cols, 16, 601);
    const Matrix up = random_matrix(TensorType::Q4_K, rows, cols, 0, 602);
    const Matrix down6 = random_matrix(TensorType::Q6_K, 40, rows, 0, 603);
    const Matrix down5 = random_matrix(TensorType::Q5_K, 37, rows, 0, 604);  // no row groups, a partial item
    const Matrix gate16 = random_matrix(TensorType::F16, rows, cols, 0, 605), up16 = random_matrix(TensorType::F16, rows, cols, 0, 606);
    const Grouped g_gate = grouped(gate), g_up = grouped(up), g_down6 = grouped(down6);
    const MatrixView v_gate = gate.view(), v_down5 = down5.view(), v_gate16 = gate16.view(), v_up16 = up16.view();
    struct Mlp {
        const char* name;
        const MatrixView *gate, *up, *down;
    };
    const Mlp mlps[] = {{"row groups throughout", &g_gate.view, &g_up.view, &g_down6.view},
                        {"rows as stored beside groups", &v_gate, &g_up.view, &v_down5},
                        {"float gate and up", &v_gate16, &v_up16, &g_down6.view}};
    const auto x = random_activations(130, cols, 607);
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        for (const Mlp& mlp : mlps) {
            CAPTURE(mlp.name);
            const MatmulTarget gated_targets[] = {{mlp.gate, nullptr}, {mlp.up, nullptr}};
            const MatmulTarget down_target{mlp.down, nullptr};
            for (const int threads : {1, 2}) {
                CAPTURE(threads);
                const ThreadCount scope(threads);
                for (const std::int64_t tokens : {1, 5, 16, 33, 130}) {
                    CAPTURE(tokens);
                    const auto gated_plan = matmul_detail::plan_matmul(set, gated_targets, tokens, true);
                    const auto down_plan = matmul_detail::plan_matmul(set, std::span(&down_target, 1), tokens);
                    // Handed on wherever both products run GEMMs and the matrices allow it.
                    CHECK(matmul_detail::hands_on_packed(gated_plan, down_plan, rows, tokens, threads, 0) ==
                          (gated_plan.use_gemm && down_plan.use_gemm && mlp.gate != &v_gate16));
                    const auto residual = random_activations(tokens, mlp.down->rows, 608);
                    std::vector<float> h(std::size_t(tokens * rows)), want(residual);
                    MatmulScratch scratch;
                    matmul_gated(set, *mlp.gate, *mlp.up, x.data(), tokens, h.data(), scratch);
                    matmul_add(set, *mlp.down, h.data(), tokens, want.data(), scratch);
                    for (const std::int64_t min_items : {std::int64_t(0), matmul_detail::kMinHandedOnItemsPerThread}) {
                        CAPTURE(min_items);
                        std::vector<float> got(residual), room(h.size());
                        matmul_detail::mlp_add(set, *mlp.gate, *mlp.up, *mlp.down, x.data(), tokens, room.data(), got.data(),
                                               scratch, 0, min_items);
                        REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
                    }
                }
            }
        }
    }
    const Matrix narrow = random_matrix(TensorType::Q4_K, 8, 256, 0, 609);
    std::vector<float> h(rows), y(8);
    MatmulScratch scratch;
    CHECK_THROWS_WITH_AS(matmul_mlp_add(g_gate.view, g_up.view, narrow.view(), x.data(), 1, h.data(), y.data(), scratch),
                         "matmul_mlp_add: the down projection takes 256 inputs, the gated hidden state has 512",
                         smol::Error);
}

TEST_CASE("the 3B shape's MLP hands h on packed at long prompts, and not where a team would wait on its last items") {
    // hands_on_packed's rule on the real shape (11008 x 2048 gate and up, 2048 x 11008 down, Q4_K
    // and Q6_K): items of 256 rows, 43 a token block. The views are only planned, never read.
    static const std::uint8_t never_read = 0;
    const MatrixView gate{TensorType::Q4_K, &never_read, 11008, 2048, 2048 / QK_K * 144};
    const MatrixView down{TensorType::Q6_K, &never_read, 2048, 11008, 11008 / QK_K * 210};
    const MatmulTarget gated_targets[] = {{&gate, nullptr}, {&gate, nullptr}};
    const MatmulTarget down_target{&down, nullptr};
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const KernelSet set = kernels_for(isa);
        const auto hands_on = [&](std::int64_t tokens, int team) {
            return matmul_detail::hands_on_packed(matmul_detail::plan_matmul(set, gated_targets, tokens, true),
                                                  matmul_detail::plan_matmul(set, std::span(&down_target, 1), tokens),
                                                  gate.rows, tokens, team);
        };
        if (!matmul_detail::plan_matmul(set, gated_targets, 512, true).use_gemm) {
            CHECK_FALSE(hands_on(512, 1));
            continue;
        }
        CHECK(hands_on(512, 1));
        CHECK(hands_on(512, 2));
        CHECK_FALSE(hands_on(32, 2));    // 43 items for 2 threads
        CHECK_FALSE(hands_on(256, 16));  // at most 8 token blocks of 43 (blocks of 32 tokens at the least)
        CHECK(hands_on(4096, 16));
    }
}

TEST_CASE("GEMM activations quantized straight into packed blocks: the bytes of packing the quantized rows") {
    // quantize_packed quantizes each packed block's tokens into a buffer of its own; the blocks must
    // be those pack_q8k_x16 makes of the rows quantize_row_q8_k writes, partial last groups included
    // (their missing tokens zero), on every set's quantizer and thread count.
    const std::int64_t cols = 768;
    const std::int64_t blocks = cols / QK_K;
    auto x = random_activations(100, cols, 507);
    std::fill_n(x.begin() + 3 * cols + QK_K, QK_K, 0.0f);  // an all-zero block: scale and quants zero
    for (const Isa isa : kAllIsas) {
        if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
        CAPTURE(isa_name(isa));
        const FromFloatFn quantize = kernels_for(isa).quantizer(TensorType::Q8_K);
        for (const int threads : {1, 2}) {
            CAPTURE(threads);
            for (const std::int64_t tokens : {2, 15, 16, 17, 100}) {
                CAPTURE(tokens);
                std::vector<BlockQ8K> rows(std::size_t(tokens * blocks));
                quantize_row_q8_k(x.data(), rows.data(), tokens * cols);
                const std::size_t n_packed = std::size_t((tokens + kPackedTokens - 1) / kPackedTokens * blocks);
                std::vector<BlockQ8Kx16> want(n_packed), got(n_packed);
                std::memset(got.data(), 0x5a, n_packed * sizeof(BlockQ8Kx16));  // every byte must be written
                pack_q8k_x16(rows.data(), tokens, blocks, want.data());
                matmul_detail::quantize_packed(quantize, x.data(), tokens, cols, got.data(), threads);
                REQUIRE(std::memcmp(want.data(), got.data(), n_packed * sizeof(BlockQ8Kx16)) == 0);
            }
        }
    }
}

TEST_CASE("quantized matmul approximates the float product") {
    // Against unquantized activations the difference is the Q8 quantization error: RMS about
    // 1/(127 * sqrt(12)) of each block's largest activation, far below 1% of sum |w x|.
    const Matrix w = random_matrix(TensorType::Q4_K, 8, 1024, 0, 77);
    const auto x = random_activations(3, 1024, 78);
    std::vector<float> y(3 * 8);
    MatmulScratch scratch;
    matmul(w.view(), x.data(), 3, y.data(), scratch);
    std::vector<float> wr(1024);
    for (int r = 0; r < 8; ++r) {
        dequantize_row(TensorType::Q4_K, w.data.data() + std::size_t(r) * w.row_bytes, wr.data(), 1024);
        for (int t = 0; t < 3; ++t) {
            double s = 0, m = 0;
            for (int c = 0; c < 1024; ++c) {
                s += double(wr[std::size_t(c)]) * x[std::size_t(t * 1024 + c)];
                m += std::abs(double(wr[std::size_t(c)]) * x[std::size_t(t * 1024 + c)]);
            }
            CHECK(std::abs(y[std::size_t(t * 8 + r)] - s) < 0.01 * m);
        }
    }
}

TEST_CASE("matmul scratch grows once and is then reused") {
    const Matrix w = random_matrix(TensorType::Q6_K, 16, 512, 0, 5);
    const auto x = random_activations(4, 512, 6);
    std::vector<float> y(4 * 16);
    MatmulScratch scratch;
    matmul(w.view(), x.data(), 1, y.data(), scratch);
    const std::size_t decode_capacity = scratch.capacity();
    CHECK(decode_capacity >= 2 * sizeof(BlockQ8K));
    const std::uint8_t* buffer = scratch.bytes(0);
    for (int step = 0; step < 5; ++step) matmul(w.view(), x.data(), 1, y.data(), scratch);
    CHECK(scratch.capacity() == decode_capacity);
    CHECK(scratch.bytes(0) == buffer);
    matmul(w.view(), x.data(), 4, y.data(), scratch);
    CHECK(scratch.capacity() >= 4 * 2 * sizeof(BlockQ8K));
    // Float weights never touch the scratch.
    MatmulScratch unused;
    const Matrix wf = random_matrix(TensorType::F16, 4, 64, 0, 9);
    matmul(wf.view(), x.data(), 1, y.data(), unused);
    CHECK(unused.capacity() == 0);
}

TEST_CASE("matmul rejects malformed views") {
    const Matrix w = random_matrix(TensorType::Q4_K, 4, 256, 0, 3);
    std::vector<float> x(512), y(8);
    MatmulScratch scratch;
    MatrixView bad = w.view();
    bad.cols = 200;  // not a whole number of blocks
    CHECK_THROWS_AS(matmul(bad, x.data(), 1, y.data(), scratch), smol::Error);
    bad = w.view();
    bad.row_bytes = 100;  // shorter than one block
    CHECK_THROWS_AS(matmul(bad, x.data(), 1, y.data(), scratch), smol::Error);
    bad = w.view();
    bad.type = TensorType::IQ2_XXS;
    CHECK_THROWS_AS(matmul(bad, x.data(), 1, y.data(), scratch), smol::Error);
    // Zero tokens is a no-op.
    y.assign(8, 3.0f);
    matmul(w.view(), x.data(), 0, y.data(), scratch);
    CHECK(y[0] == 3.0f);
}

TEST_CASE("matmul on llama.cpp-quantized Q4_K and Q6_K tensors agrees with the naive reference on every kernel set") {
    // Real blocks from llama.cpp's quantizer (fixture tiny/: Q4_K_M), not ones smol made.
    const auto file = gguf::File::open(SMOL_TEST_DATA_DIR "/tiny/smollm3-tiny-Q4_K_M.gguf");
    int checked_q4k = 0, checked_q6k = 0;
    const std::int64_t tokens = 3;
    for (const gguf::TensorInfo& t : file.tensors()) {
        if ((t.type != TensorType::Q4_K && t.type != TensorType::Q6_K) || t.shape.size() != 2) continue;
        Matrix w{t.type, t.rows(), t.shape[0], t.row_bytes(), std::vector<std::uint8_t>(t.data, t.data + t.n_bytes)};
        const auto x = random_activations(tokens, w.cols, std::uint32_t(t.offset));
        const Expected expected = naive_matmul(w, x, tokens);
        for (const Isa isa : kAllIsas) {
            if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
            CAPTURE(t.name);
            CAPTURE(isa_name(isa));
            MatmulScratch scratch;
            for (const std::int64_t n : {std::int64_t(1), tokens}) {
                std::vector<float> y(std::size_t(n * w.rows));
                matmul(kernels_for(isa), w.view(), x.data(), n, y.data(), scratch);
                for (std::size_t i = 0; i < y.size(); ++i)
                    REQUIRE(std::abs(y[i] - expected.y[i]) <= 1e-5 * expected.magnitude[i] + 1e-30);
            }
        }
        (t.type == TensorType::Q4_K ? checked_q4k : checked_q6k) += 1;
    }
    MESSAGE("checked ", checked_q4k, " Q4_K and ", checked_q6k, " Q6_K tensors");
    CHECK(checked_q4k > 0);
    CHECK(checked_q6k > 0);
}

TEST_CASE("matmul on llama.cpp-quantized tensors of every type the table added: the naive reference's values, every set the same bits") {
    // Real blocks from llama.cpp's quantizer (tests/data/tiny-quants: the tiny float model with
    // every matrix in one type), not ones smol made. Layer 0's matrices and the embedding. 5 tokens
    // go through the tiles; 21 through the prompt GEMMs of the types that have them (and a
    // partial group of 16).
    static_assert(5 < kMinGemmTokens && 21 >= kMinGemmTokens, "5 tokens take the tiles, 21 the GEMMs");
    for (const std::int64_t tokens : {std::int64_t(5), std::int64_t(21)})
    for (const TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_K,
                                  TensorType::Q3_K, TensorType::Q2_K, TensorType::Q5_1, TensorType::IQ4_NL,
                                  TensorType::IQ4_XS}) {
        const std::string name(type_name(type));
        CAPTURE(name);
        CAPTURE(tokens);
        const auto file = gguf::File::open(SMOL_TEST_DATA_DIR "/tiny-quants/smollm3-tiny-" + name + ".gguf");
        int checked = 0;
        for (const gguf::TensorInfo& t : file.tensors()) {
            if (t.type != type || t.shape.size() != 2) continue;
            if (t.name.rfind("blk.0.", 0) != 0 && t.name != "token_embd.weight") continue;
            CAPTURE(t.name);
            Matrix w{t.type, t.rows(), t.shape[0], t.row_bytes(), std::vector<std::uint8_t>(t.data, t.data + t.n_bytes)};
            const auto x = random_activations(tokens, w.cols, std::uint32_t(t.offset));
            const Expected expected = naive_matmul(w, x, tokens);
            std::vector<float> first_set;
            for (const Isa isa : kAllIsas) {
                if (!isa_compiled(isa) || !cpu_features().supports(isa)) continue;
                CAPTURE(isa_name(isa));
                MatmulScratch scratch;
                std::vector<float> y(std::size_t(tokens * w.rows));
                matmul(kernels_for(isa), w.view(), x.data(), tokens, y.data(), scratch);
                for (std::size_t i = 0; i < y.size(); ++i)
                    REQUIRE(std::abs(y[i] - expected.y[i]) <= 1e-5 * expected.magnitude[i] + 1e-30);
                std::vector<float> decoded(static_cast<std::size_t>(w.rows));  // the last token alone
                matmul(kernels_for(isa), w.view(), x.data() + (tokens - 1) * w.cols, 1, decoded.data(), scratch);
                REQUIRE(std::memcmp(decoded.data(), y.data() + (tokens - 1) * w.rows, decoded.size() * sizeof(float)) == 0);
                if (first_set.empty()) first_set = y;
                else REQUIRE(std::memcmp(first_set.data(), y.data(), y.size() * sizeof(float)) == 0);
            }
            ++checked;
        }
        CHECK(checked == 8);  // token_embd and layer 0's seven matrices
    }
}

}  // namespace test_matmul
