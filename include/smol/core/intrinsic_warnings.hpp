#pragma once
// GCC 12's AVX-512 intrinsics seed their masked forms with _mm512_undefined_*(), which its
// -Wuninitialized and -Wmaybe-uninitialized report once inlined (GCC bug 105593); the values
// are never read. Code built from such intrinsics sits between these two macros, the one place
// that silences the report; other compilers see nothing.
//
//   SMOL_INTRINSIC_WARNINGS_OFF
//   ...kernels...
//   SMOL_INTRINSIC_WARNINGS_ON

#if defined(__GNUC__) && !defined(__clang__)
#define SMOL_INTRINSIC_WARNINGS_OFF                         \
    _Pragma("GCC diagnostic push")                          \
    _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
    _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define SMOL_INTRINSIC_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define SMOL_INTRINSIC_WARNINGS_OFF
#define SMOL_INTRINSIC_WARNINGS_ON
#endif
