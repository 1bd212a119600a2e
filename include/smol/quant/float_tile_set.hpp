// The tile for float weights (F32, F16, BF16) against float activations, written once and
// compiled per instruction set: kernels_avx2.hpp, kernels_avx512.hpp and float_tiles_xsimd.hpp
// each include this file inside their namespace, after defining SMOL_SET_TARGET (the set's
// target attribute, nothing for AVX2 and NEON), Floats (the set's float vector,
// core/float_vectors.hpp) and the loaders, which are all that differs: LoadF32, LoadF16,
// LoadBF16, each with `load`, kLanes weights as floats.
// (An include per set and not a template over the set: a function handling a __m512 by value
// must be compiled for AVX-512, and a template cannot take its target from a parameter.)
//
// Each row streams kLanes weights at a time, converted once and used for every column; lane l
// of an accumulator sums the products i = l mod kLanes in order of i, the lanes are summed by
// the set's reduction (Floats::sum: its order is why the sets' bits differ), and the last
// n mod kLanes products are added one by one.
//
// No include guard: included once per set namespace, never on its own; float_tiles.hpp, which
// the set files include first, brings the headers this uses.

// The DotTileFn contract (kernel_api.hpp) for C columns: kTileRows weight rows, the missing ones
// repeating the last and dropped, so the accumulators stay in registers.
template <class Load, int C>
SMOL_SET_TARGET inline void float_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Weight = typename Load::Weight;
    using F = Floats;
    using V = F::V;
    const kernel_detail::TileOperands<Weight, float, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    V acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = F::zero();
    constexpr std::int64_t lanes = F::kLanes;
    const std::int64_t body = n - n % lanes;
    for (std::int64_t i = 0; i < body; i += lanes) {
        V w[kTileRows];
        const bool new_line = (std::size_t(i) * sizeof(Weight)) % 64 < lanes * sizeof(Weight);  // once per 64 bytes
        for (int r = 0; r < kTileRows; ++r) {
            if (new_line) prefetch_ahead(t.w[r] + i, 64, ahead);
            w[r] = Load::load(t.w[r] + i);
        }
        for (int c = 0; c < C; ++c) {
            const V x = F::load(t.a[c] + i);
            for (int r = 0; r < kTileRows; ++r) acc[r][c] = F::fma(w[r], x, acc[r][c]);
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            float sum = F::sum(acc[r][c]);
            for (std::int64_t i = body; i < n; ++i) sum += Load::scalar(t.w[r] + i) * t.a[c][i];
            result[r][c] = sum;
        }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

