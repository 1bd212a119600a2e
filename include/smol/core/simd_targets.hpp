#pragma once
// The instruction sets smol's kernels are compiled for, in one place: which kernel sets this
// build contains (SMOL_HAVE_<SET>_KERNELS) and the attribute that compiles one function for a set
// above the baseline (SMOL_TARGET_<SET>). The baseline is x86-64-v3 (AVX2, FMA, F16C; see
// CMakeLists.txt), so AVX2 code is plain code; AVX-512 and AMX functions carry their target and
// run only after cpu_features() (core/cpu.hpp) said the CPU has the set, which quant/dispatch.hpp
// and ops/kv_kernels.hpp guarantee. quant/ and ops/ kernels all read these macros.

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SMOL_HAVE_AVX2_KERNELS 1
#endif

// A baseline function that a set's entry point (target attribute and `flatten`) must inline for the
// set's instructions to reach it. GCC's flatten inlines the whole call tree; clang's (14, Debian
// 12's) only the calls written in the entry point itself, so deeper kernels stayed baseline
// functions calling the set's instructions one call each (decode at half speed, measured).
#if defined(__GNUC__) || defined(__clang__)
#define SMOL_INLINE_INTO_SET __attribute__((always_inline))
#else
#define SMOL_INLINE_INTO_SET
#endif

// Fully unrolls the small fixed loops over a block's vectors: at -O2 GCC keeps such loops and their
// arrays of vectors in memory (only -O3 unrolls them by itself), spilling what belongs in registers.
#define SMOL_UNROLL _Pragma("GCC unroll 16")

// Functions compiled for AVX-512 by attribute need GCC or Clang on x86-64.
#if defined(SMOL_HAVE_AVX2_KERNELS) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAVE_AVX512_KERNELS 1
#define SMOL_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define SMOL_HAVE_AMX_KERNELS 1
#define SMOL_TARGET_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))
// AVX-VNNI (the VEX form of vpdpbusd on 256-bit vectors): GCC 11 and Clang 12 know it.
#if defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11
#define SMOL_HAVE_AVX_VNNI_KERNELS 1
#define SMOL_TARGET_AVX_VNNI __attribute__((target("avxvnni")))
#endif
#endif

// AArch64: the baseline is Armv8.0 with Advanced SIMD (every AArch64 core has it), so the neon
// set is plain code; dotprod (Armv8.2 sdot) functions carry their target and run only after
// cpu_features() said the cores have the feature, so a plain `-std=c++20 -O2` build holds every
// ARM set. GCC needs the architecture named too ("arch=armv8.2-a+dotprod": its arm_neon.h declares
// vdotq_s32 for exactly that target, and inlines an intrinsic only into a function whose target
// includes the intrinsic's). Clang 14's arm_neon.h declares vdotq_s32 only when the whole file is
// compiled with dotprod (it ignores target attributes there), so a Clang build holds the dotprod
// set only when built with it (-march=armv8.2-a+dotprod or later). The i8mm set (Armv8.6 smmla)
// is the same: GCC's arm_neon.h declares vmmlaq_s32 for "arch=armv8.2-a+i8mm", and the set's
// functions also run sdot (every core with i8mm has it; the set falls back on dotprod), so their
// target names both; Clang 14 holds the set only when built with i8mm (-march=armv8.6-a).
#if defined(__aarch64__) && defined(__ARM_NEON) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAVE_NEON_KERNELS 1
#if defined(__clang__)
#if defined(__ARM_FEATURE_DOTPROD)
#define SMOL_HAVE_DOTPROD_KERNELS 1
#define SMOL_TARGET_DOTPROD
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define SMOL_HAVE_I8MM_KERNELS 1
#define SMOL_TARGET_I8MM
#endif
#endif
#else
#define SMOL_HAVE_DOTPROD_KERNELS 1
#define SMOL_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define SMOL_HAVE_I8MM_KERNELS 1
#define SMOL_TARGET_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif
#endif
