#pragma once
// OpenMP's barrier wait. libgomp's default makes a waiting thread spin for ~300,000 iterations
// before it sleeps (LLVM's libomp: 200 ms). When the cores are shared with other work, a
// spinning thread burns the time slice that the thread it waits for needs: a 2-thread decode of
// the tiny model measured here fell from ~110 to 4-15 tokens/s on a loaded machine (1 thread:
// 112; a 10,000-iteration spin: ~110). A short spin keeps barriers quick on an idle machine and
// degrades gracefully on a busy one.
//
// The runtimes read these settings when they are loaded, before main(), so a program that wants
// them changed must be started with them: use_short_openmp_spin() re-executes the program once
// with the short spin set. It never overrides what the user chose (OMP_WAIT_POLICY,
// GOMP_SPINCOUNT, KMP_BLOCKTIME), and SMOL_KEEP_OPENMP_WAIT=1 turns it off.

#include <unistd.h>

#include <cstdlib>

namespace smol {

// Call first thing in main(). Returns only if nothing needed changing or the re-exec failed
// (the program then runs with the runtime's defaults).
inline void use_short_openmp_spin(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("KMP_BLOCKTIME") ||
        std::getenv("SMOL_KEEP_OPENMP_WAIT"))
        return;
    ::setenv("GOMP_SPINCOUNT", "10000", 0);  // libgomp (GCC): iterations
    ::setenv("KMP_BLOCKTIME", "1", 0);       // libomp (clang): milliseconds
    ::execv("/proc/self/exe", argv);
}

}  // namespace smol
