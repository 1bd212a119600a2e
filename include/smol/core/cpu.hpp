#pragma once
// Run-time CPU feature detection. On x86 an instruction set is usable only when the CPU has it (cpuid)
// AND the operating system saves its registers on context switches (xgetbv XCR0), so both
// are checked. The kernel set smol runs is the best usable one, or another the CPU runs forced with
// SMOL_ISA=scalar|avx2|avx_vnni|avx512|amx|neon|dotprod|i8mm (tests and benchmarks compare kernel sets this
// way). AMX needs a third yes: Linux hands out tile state only to processes that ask for it (arch_prctl),
// so the request is made once here and a refusal leaves the AVX-512 set in charge. On AArch64 the
// operating system says what the cores run: Linux through getauxval's hardware capability bits,
// macOS through sysctl's hw.optional.arm.FEAT_* names.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "smol/core/error.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define SMOL_X86 1
#include <cpuid.h>
#endif
#if SMOL_X86 && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define SMOL_AARCH64 1
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

namespace smol {

// Kernel sets, in the order smol prefers them (a higher one is picked where the CPU runs both).
// A set needs what the set it falls back on needs, and more: avx_vnni is the AVX2 set with
// AVX-VNNI's 256-bit vpdpbusd (Alder Lake and later Intel cores, which lack AVX-512); avx512 needs
// AVX2 but not AVX-VNNI (Zen 4 and Ice Lake have AVX-512 VNNI without it), so the sets form a
// tree, not a line; amx is the AVX-512 set with AMX int8 tiles for prompt GEMMs (decode stays on
// AVX-512). Every set from avx2 on runs AVX2 code. The ARM sets form a line of their own: neon
// (Armv8.0 Advanced SIMD, every AArch64 core), dotprod (Armv8.2's sdot) and i8mm (Armv8.6's smmla),
// each needing the one before. An x86 CPU runs none of them and an ARM one none of the x86 sets, so
// the highest set a CPU supports is still its best.
enum class Isa : int { scalar = 0, avx2 = 1, avx_vnni = 2, avx512 = 3, amx = 4, neon = 5, dotprod = 6, i8mm = 7 };
inline constexpr int kIsaCount = 8;
inline constexpr Isa kAllIsas[kIsaCount] = {Isa::scalar, Isa::avx2, Isa::avx_vnni, Isa::avx512,
                                            Isa::amx,    Isa::neon, Isa::dotprod,  Isa::i8mm};

inline std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx_vnni: return "avx_vnni";
        case Isa::avx512: return "avx512";
        case Isa::amx: return "amx";
        case Isa::neon: return "neon";
        case Isa::dotprod: return "dotprod";
        case Isa::i8mm: return "i8mm";
    }
    return "?";
}

// The set whose kernels `isa` runs where it has none of its own (a type without its GEMM, a build
// without the set); scalar falls back on itself.
constexpr Isa fallback_isa(Isa isa) {
    switch (isa) {
        case Isa::amx: return Isa::avx512;
        case Isa::avx512:
        case Isa::avx_vnni: return Isa::avx2;
        case Isa::i8mm: return Isa::dotprod;
        case Isa::dotprod: return Isa::neon;
        default: return Isa::scalar;
    }
}

struct CpuFeatures {
    std::string vendor;
    std::string brand;
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512_vnni = false, avx_vnni = false;
    bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
    bool amx_permitted = false;  // the kernel granted this process tile state (Linux arch_prctl)
    bool neon = false;     // AArch64 Advanced SIMD (FEAT_AdvSIMD)
    bool dotprod = false;  // sdot/udot (FEAT_DotProd)
    bool i8mm = false;     // smmla/ummla/usmmla (FEAT_I8MM)

    // The AVX-512 kernel set uses F, BW, VL, DQ and VNNI instructions.
    bool has_avx512_kernels() const { return avx512f && avx512bw && avx512vl && avx512dq && avx512_vnni; }
    bool has_avx2_kernels() const { return avx2 && fma && f16c; }
    bool has_avx_vnni_kernels() const { return has_avx2_kernels() && avx_vnni; }
    bool has_amx_kernels() const { return has_avx512_kernels() && amx_tile && amx_int8 && amx_permitted; }

    bool supports(Isa isa) const {
        switch (isa) {
            case Isa::scalar: return true;
            case Isa::avx2: return has_avx2_kernels();
            case Isa::avx_vnni: return has_avx_vnni_kernels();
            case Isa::avx512: return has_avx2_kernels() && has_avx512_kernels();
            case Isa::amx: return has_avx2_kernels() && has_amx_kernels();
            case Isa::neon: return neon;
            case Isa::dotprod: return neon && dotprod;
            case Isa::i8mm: return neon && dotprod && i8mm;
        }
        return false;
    }
    // The most preferred set this CPU runs.
    Isa best_isa() const {
        for (int isa = kIsaCount - 1; isa > 0; --isa)
            if (supports(Isa(isa))) return Isa(isa);
        return Isa::scalar;
    }

    std::string describe() const {
        std::string s = brand.empty() ? vendor : brand;
        s += " |";
        const std::pair<const char*, bool> flags[] = {
            {"avx2", avx2},         {"fma", fma},           {"f16c", f16c},
            {"avx512f", avx512f},   {"avx512bw", avx512bw}, {"avx512vl", avx512vl},
            {"avx512dq", avx512dq}, {"avx512_vnni", avx512_vnni}, {"avx_vnni", avx_vnni},
            {"amx_tile", amx_tile}, {"amx_int8", amx_int8}, {"amx_bf16", amx_bf16},
            {"neon", neon},         {"dotprod", dotprod},   {"i8mm", i8mm}};
        for (const auto& [name, on] : flags)
            if (on) (s += ' ') += name;
        if (amx_tile && !amx_permitted) s += " (amx tile state refused by the OS)";
        s += " | kernels: ";
        s += isa_name(best_isa());
        return s;
    }
};

namespace cpu_detail {

#if SMOL_X86
inline void cpuid(unsigned leaf, unsigned subleaf, unsigned (&r)[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
}

// xgetbv is read with inline asm so this header needs no -mxsave.
inline std::uint64_t xcr0() {
    std::uint32_t eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (std::uint64_t(edx) << 32) | eax;
}

// Asks Linux for permission to use AMX tile data (XFEATURE_XTILEDATA, 18); without it the first
// tile instruction faults. Granted for the whole process and kept; asking again is harmless.
inline bool request_amx_permission() {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

inline CpuFeatures detect() {
    CpuFeatures f;
    unsigned r[4];
    cpuid(0, 0, r);
    const unsigned max_leaf = r[0];
    char vendor[13] = {};
    std::memcpy(vendor, &r[1], 4);
    std::memcpy(vendor + 4, &r[3], 4);
    std::memcpy(vendor + 8, &r[2], 4);
    f.vendor = vendor;

    cpuid(0x80000000u, 0, r);
    if (r[0] >= 0x80000004u) {
        char brand[49] = {};
        for (unsigned i = 0; i < 3; ++i) {
            cpuid(0x80000002u + i, 0, r);
            std::memcpy(brand + 16 * i, r, 16);
        }
        f.brand = brand;
        while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
        while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(f.brand.begin());
    }
    if (max_leaf < 1) return f;

    cpuid(1, 0, r);
    const bool osxsave = (r[2] >> 27) & 1;
    const bool avx = (r[2] >> 28) & 1;
    const bool fma = (r[2] >> 12) & 1;
    const bool f16c = (r[2] >> 29) & 1;
    const std::uint64_t xcr = osxsave ? xcr0() : 0;
    const bool os_avx = (xcr & 0x6) == 0x6;                  // XMM and YMM state
    const bool os_avx512 = os_avx && (xcr & 0xe0) == 0xe0;   // opmask, ZMM_Hi256, Hi16_ZMM
    const bool os_amx = (xcr & 0x60000) == 0x60000;          // XTILECFG and XTILEDATA
    if (!(avx && os_avx)) return f;
    f.fma = fma;
    f.f16c = f16c;
    if (max_leaf < 7) return f;

    cpuid(7, 0, r);
    const unsigned ebx = r[1], ecx = r[2], edx = r[3];
    const unsigned max_subleaf = r[0];
    f.avx2 = (ebx >> 5) & 1;
    if (os_avx512) {
        f.avx512f = (ebx >> 16) & 1;
        f.avx512dq = (ebx >> 17) & 1;
        f.avx512bw = (ebx >> 30) & 1;
        f.avx512vl = (ebx >> 31) & 1;
        f.avx512_vnni = (ecx >> 11) & 1;
    }
    if (os_amx) {
        f.amx_bf16 = (edx >> 22) & 1;
        f.amx_tile = (edx >> 24) & 1;
        f.amx_int8 = (edx >> 25) & 1;
    }
    if (max_subleaf >= 1) {
        cpuid(7, 1, r);
        f.avx_vnni = (r[0] >> 4) & 1;
    }
    if (f.amx_tile) f.amx_permitted = request_amx_permission();
    return f;
}
#elif SMOL_AARCH64
#if defined(__APPLE__)
// A sysctl that names a feature is 1 where the cores have it; a missing name (an older macOS) is no.
inline bool sysctl_says_yes(const char* name) {
    int value = 0;
    std::size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value == 1;
}
#endif

inline CpuFeatures detect() {
    CpuFeatures f;
    f.vendor = "arm";
    f.neon = true;  // Advanced SIMD is mandatory in AArch64 (Linux and macOS both require it)
#if defined(__linux__)
    // Bits of AT_HWCAP and AT_HWCAP2 from Linux's arch/arm64/include/uapi/asm/hwcap.h, spelled here
    // so older C libraries' headers need not know them.
    constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimddp = 1ul << 20;
    constexpr unsigned long kHwcap2I8mm = 1ul << 13;
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    f.neon = (hwcap & kHwcapAsimd) != 0;
    f.dotprod = (hwcap & kHwcapAsimddp) != 0;
    f.i8mm = (hwcap2 & kHwcap2I8mm) != 0;
#elif defined(__APPLE__)
    f.dotprod = sysctl_says_yes("hw.optional.arm.FEAT_DotProd");
    f.i8mm = sysctl_says_yes("hw.optional.arm.FEAT_I8MM");
#endif
    return f;
}
#else
inline CpuFeatures detect() {
    CpuFeatures f;
    f.vendor = "unknown";
    return f;
}
#endif

}  // namespace cpu_detail

// Detected once per process.
inline const CpuFeatures& cpu_features() {
    static const CpuFeatures features = cpu_detail::detect();
    return features;
}

inline std::string describe() { return cpu_features().describe(); }

// Parses an ISA name as SMOL_ISA spells it.
inline Isa parse_isa(std::string_view name) {
    for (int isa = 0; isa < kIsaCount; ++isa)
        if (name == isa_name(Isa(isa))) return Isa(isa);
    fail("SMOL_ISA: expected scalar, avx2, avx_vnni, avx512, amx, neon, dotprod or i8mm, got '", name, "'");
}

// The kernel set to run: the best the CPU supports, or SMOL_ISA's if set. Asking for a set the
// CPU cannot run is an error rather than a silent fallback, so benchmarks never lie.
inline Isa selected_isa() {
    const CpuFeatures& cpu = cpu_features();
    const char* env = std::getenv("SMOL_ISA");
    if (env == nullptr || *env == '\0') return cpu.best_isa();
    const Isa wanted = parse_isa(env);
    if (!cpu.supports(wanted))
        fail("SMOL_ISA=", env, " but this CPU cannot run that kernel set (its best is ", isa_name(cpu.best_isa()), ": ",
             cpu.describe(), ")");
    return wanted;
}

// The kernels an op runs: kernels_for(isa) (a pointer, null where this build has none for that
// set) of selected_isa() or of the first set down its fallback chain that has them (AMX: AVX-512's;
// AVX-VNNI: AVX2's; i8mm and dotprod: NEON's), else kernels_for(Isa::scalar).
template <class KernelsFor>
auto kernels_down_fallback_chain(KernelsFor kernels_for) {
    for (Isa isa = selected_isa(); isa != Isa::scalar; isa = fallback_isa(isa))
        if (const auto* k = kernels_for(isa)) return k;
    return kernels_for(Isa::scalar);
}

}  // namespace smol
