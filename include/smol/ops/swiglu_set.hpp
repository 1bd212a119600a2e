// The SwiGLU kernels, written once and compiled per set: swiglu_x86.hpp (AVX2, AVX-512) and
// swiglu_neon.hpp include this file inside each set's namespace after defining
//   SMOL_SET_TARGET  the set's target attribute (nothing for AVX2 and NEON, the baselines)
//   Lanes            the set's vectors: Lanes::F of 2 * Lanes::kDoubles floats, Lanes::D of
//                    kDoubles doubles, Lanes::I of as many 64-bit integers, and the operations
//                    below on them
// and it defines the set's entry points, swiglu and exp_values. glibc's expf works in doubles:
// each float vector is widened into two double vectors, which take its steps lane by lane.
//
// No include guard: included once per set namespace, never on its own.

// e^x for the lanes of x (floats widened), as glibc's expf computes it for |x| < 88: x * 32 / ln 2
// = k + r with k an integer and |r| <= 1/2, as this architecture's build of it splits it
// (Lanes::reduce); 2^(k/32) from the table and k's integer bits; 2^(r/32) by the polynomial,
// fused where glibc's build fused it; the product rounded to float by the caller (expf_vector).
SMOL_SET_TARGET SMOL_INLINE_INTO_SET inline Lanes::D expf_lanes(Lanes::D x) {
    Lanes::D r;
    const Lanes::I k = Lanes::reduce(x, r);
    const Lanes::D z = Lanes::fma(r, Lanes::set1(glibc_expf::kC0), Lanes::set1(glibc_expf::kC1));
    const Lanes::D r2 = Lanes::mul(r, r);
    const Lanes::D y = Lanes::fma(z, r2, Lanes::fma(r, Lanes::set1(glibc_expf::kC2), Lanes::set1(1.0)));
    return Lanes::mul(y, Lanes::exp2_over_32(k));
}

// expf_lanes over a float vector: its two halves widened, each rounded back to float.
SMOL_SET_TARGET SMOL_INLINE_INTO_SET inline Lanes::F expf_vector(Lanes::F v) {
    return Lanes::to_floats(expf_lanes(Lanes::low(v)), expf_lanes(Lanes::high(v)));
}

// y[i] = std::exp(x[i]) for i < n, glibc's bits: the lanes' exp, with its special cases (|x| >=
// 88, NaN) through std::exp.
SMOL_SET_TARGET inline void exp_values(const float* x, float* y, std::int64_t n) {
    constexpr int kStep = 2 * Lanes::kDoubles;
    std::int64_t i = 0;
    for (; i + kStep <= n; i += kStep) {
        const Lanes::F v = Lanes::load(x + i);
        if (Lanes::any_outside_88(v)) {
            for (int l = 0; l < kStep; ++l) y[i + l] = std::exp(x[i + l]);
            continue;
        }
        Lanes::store(y + i, expf_vector(v));
    }
    for (; i < n; ++i) y[i] = std::exp(x[i]);
}

// h[i] = silu(gate[i]) * up[i] for i < n (h may alias gate or up), the bits of swiglu_scalar: a
// vector whose gates all lie in (-88, 88) in the lanes, others (glibc's special cases: huge,
// infinite, NaN) through silu itself.
SMOL_SET_TARGET inline void swiglu(const float* gate, const float* up, float* h, std::int64_t n) {
    constexpr int kStep = 2 * Lanes::kDoubles;
    std::int64_t i = 0;
    for (; i + kStep <= n; i += kStep) {
        const Lanes::F g = Lanes::load(gate + i), u = Lanes::load(up + i);
        if (Lanes::any_outside_88(g)) {
            for (int l = 0; l < kStep; ++l) h[i + l] = silu(gate[i + l]) * up[i + l];
            continue;
        }
        const Lanes::F e = expf_vector(Lanes::negate(g));
        Lanes::store(h + i, Lanes::mul(Lanes::div(g, Lanes::add(Lanes::one(), e)), u));
    }
    for (; i < n; ++i) h[i] = silu(gate[i]) * up[i];
}
