#pragma once
// The operating system's calls that differ between Linux and macOS, in one place: memory
// mappings and the advice given about them, which pages are resident, the CPUs a thread may run
// on, the running program's path, and the process figures the tools report. The CPU's features
// are core/cpu.hpp's; every other header of the library, and smol-cli and smol-bench, use plain
// POSIX and these. Linux is what is built and tested; the macOS branches (Apple Silicon) are
// written against Apple's documented calls and have not been compiled (docs/arm.md).

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#if defined(__APPLE__)
#include <libproc.h>
#include <mach-o/dyld.h>
#include <sys/sysctl.h>
#else
#include <sched.h>

#include <fstream>
#endif

namespace smol::platform {

inline std::size_t page_size() { return std::size_t(::sysconf(_SC_PAGESIZE)); }

// n zero bytes of address space whose pages become resident only when written, or nullptr (with
// errno set) where none can be had.
inline void* reserve_lazy_zeroed(std::size_t n) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE;  // no swap set aside for what may never be written (Linux)
#endif
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_NOHUGEPAGE
    // A caller writes regions far apart from their start: with transparent huge pages set to
    // "always", the first write to each would make 2 MiB resident however little is written.
    // Advice only: a kernel without THP refuses it and nothing changes. (macOS has no THP.)
    (void)::madvise(p, n, MADV_NOHUGEPAGE);
#endif
    return p;
}

// Gives `advice` for the whole pages of `page` bytes inside [p, p + n), if any: a page only partly
// in the range is left alone.
inline void advise_whole_pages(const void* p, std::size_t n, std::size_t page, int advice) {
    const std::uintptr_t first = (std::uintptr_t(p) + page - 1) / page * page;
    const std::uintptr_t end = (std::uintptr_t(p) + n) / page * page;
    if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, advice);
}

// Asks for the whole 2 MiB pages inside [p, p + n) to be backed by huge pages (transparent huge
// pages in "madvise" mode). Advice only: where the system has none, nothing changes.
inline void advise_huge_pages(void* p, std::size_t n) {
#ifdef MADV_HUGEPAGE
    advise_whole_pages(p, n, std::size_t(2) << 20, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

// The n bytes of the open file fd, read-only and private (nothing is written through it, so it
// shares the page cache with every other reader), or nullptr (with errno set).
inline const void* map_read_only(int fd, std::size_t n) {
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    return p == MAP_FAILED ? nullptr : p;
}

inline void unmap(const void* p, std::size_t n) { ::munmap(const_cast<void*>(p), n); }

// Asks for the whole pages covering [p, p + n) to be read ahead; p need not be page-aligned.
inline void advise_will_need(const void* p, std::size_t n) {
    const std::size_t page = page_size(), skew = std::uintptr_t(p) % page;
    if (n) (void)::madvise(static_cast<char*>(const_cast<void*>(p)) - skew, n + skew, MADV_WILLNEED);
}

// Tells the system that the whole pages inside [p, p + n) will not be read again, so they leave
// the process's resident memory (a later read pages a file's back in from the file).
inline void advise_wont_need(const void* p, std::size_t n) { advise_whole_pages(p, n, page_size(), MADV_DONTNEED); }

// How many bytes of the page-aligned range [p, p + n) are resident, in whole pages; false (with
// errno set) where the system cannot say.
inline bool resident_bytes(const void* p, std::size_t n, std::size_t& bytes) {
    const std::size_t page = page_size();
#if defined(__APPLE__)
    std::vector<char> in_core((n + page - 1) / page);
    if (::mincore(static_cast<caddr_t>(const_cast<void*>(p)), n, in_core.data()) != 0) return false;
#else
    std::vector<unsigned char> in_core((n + page - 1) / page);
    if (::mincore(const_cast<void*>(p), n, in_core.data()) != 0) return false;
#endif
    std::size_t pages = 0;
    for (const auto flags : in_core) pages += flags & 1;
    bytes = pages * page;
    return true;
}

// The CPUs the calling thread may run on, ascending; empty where the system cannot say (macOS has
// no CPU masks).
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
#if !defined(__APPLE__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
#endif
    return cpus;
}

// Lets the calling thread run on `cpus` (a program it executes inherits the mask); false where
// the system refused (CPUs it does not have, say) or has no CPU masks.
inline bool allow_cpus(const std::vector<int>& cpus) {
#if defined(__APPLE__)
    (void)cpus;
    return false;
#else
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int cpu : cpus)
        if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    return CPU_COUNT(&set) > 0 && ::sched_setaffinity(0, sizeof set, &set) == 0;
#endif
}

// The running program's file, to start it again; empty where the system cannot say.
inline std::string executable_path() {
#if defined(__APPLE__)
    std::uint32_t size = 0;
    _NSGetExecutablePath(nullptr, &size);  // sets size, including the terminating NUL
    std::string path(size, '\0');
    if (_NSGetExecutablePath(path.data(), &size) != 0) return {};
    path.resize(path.find('\0'));
    return path;
#else
    return "/proc/self/exe";  // the kernel resolves it to this process's program
#endif
}

// Replaces this process with its own program started again with argv (the environment as it is
// now); returns only if that failed.
inline void restart_self(char** argv) {
    const std::string path = executable_path();
    if (!path.empty()) ::execv(path.c_str(), argv);
}

#if defined(__APPLE__)
// The first of the sysctl values `names` the system has, in bytes; 0 if none.
inline std::size_t sysctl_bytes(std::initializer_list<const char*> names) {
    for (const char* name : names) {
        std::int64_t value = 0;
        std::size_t size = sizeof value;
        if (::sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value > 0) return std::size_t(value);
    }
    return 0;
}
#else
// A sysconf value in bytes; 0 where the system does not say (sysconf answers -1 or 0 then).
inline std::size_t sysconf_bytes(int name) {
    const long value = ::sysconf(name);
    return value > 0 ? std::size_t(value) : 0;
}
#endif

// The largest cache's size in bytes (the last level), 0 where the system does not say.
inline std::size_t last_level_cache_bytes() {
#if defined(__APPLE__)
    return sysctl_bytes({"hw.l3cachesize", "hw.perflevel0.l2cachesize", "hw.l2cachesize"});
#elif defined(_SC_LEVEL3_CACHE_SIZE)
    return sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
#else
    return 0;
#endif
}

// A core's second-level cache in bytes (a performance core's on a hybrid Mac), 0 where the
// system does not say.
inline std::size_t l2_cache_bytes() {
#if defined(__APPLE__)
    return sysctl_bytes({"hw.perflevel0.l2cachesize", "hw.l2cachesize"});
#elif defined(_SC_LEVEL2_CACHE_SIZE)
    return sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
#else
    return 0;
#endif
}

// This process's peak resident memory so far, in bytes (getrusage's ru_maxrss is in KiB on
// Linux and in bytes on macOS).
inline std::uint64_t peak_resident_bytes() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
#if defined(__APPLE__)
    return std::uint64_t(usage.ru_maxrss);
#else
    return std::uint64_t(usage.ru_maxrss) * 1024;
#endif
}

// Process pid's resident memory now, in bytes; 0 where it cannot be read (no such process).
inline std::uint64_t resident_bytes_of(int pid) {
#if defined(__APPLE__)
    proc_taskinfo info{};
    if (::proc_pidinfo(pid, PROC_PIDTASKINFO, 0, &info, sizeof info) != int(sizeof info)) return 0;
    return info.pti_resident_size;
#else
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
#endif
}

}  // namespace smol::platform
