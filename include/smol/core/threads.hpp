#pragma once
// OpenMP's barrier wait. libgomp's default makes a waiting thread spin for ~300,000 iterations
// before it sleeps (LLVM's libomp: 200 ms). When the cores are shared with other work, a
// spinning thread burns the time slice that the thread it waits for needs. On the tiny float
// model (2 threads, decode, barrier-bound, so the worst case for short spins; figures in
// docs/performance.md) a short spin loses a little where barriers dominate on an idle machine
// and keeps a busy one from collapsing, while passive waiting is slowest on both; on the 3B
// model, where each barrier guards milliseconds of work, the idle cost vanishes.
//
// The runtimes read these settings when they are loaded, before main(), so a program that wants
// them changed must be started with them: use_short_openmp_spin() re-executes the program once
// with the short spin set. It never overrides what the user chose (OMP_WAIT_POLICY,
// GOMP_SPINCOUNT, KMP_BLOCKTIME), and SMOL_KEEP_OPENMP_WAIT=1 turns it off.
//
// Binding survives the restart: libgomp binds the initial thread to the first place before
// main() when OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY asks it to, and a CPU mask is
// inherited across exec, so the restarted runtime would find that one place and put the whole
// team on it (2 threads on one core of two: half the speed, docs/performance.md). The thread is
// let onto every place's CPUs before the restart, and the runtime binds it afresh.

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "smol/core/platform.hpp"

namespace smol {

// Lets the calling thread run on the CPUs of every OpenMP place again (none: nothing is bound,
// nothing to do).
inline void allow_every_place() {
    std::vector<int> cpus;
    for (int place = 0; place < omp_get_num_places(); ++place) {
        std::vector<int> ids(std::size_t(std::max(omp_get_place_num_procs(place), 0)));
        if (!ids.empty()) omp_get_place_proc_ids(place, ids.data());
        cpus.insert(cpus.end(), ids.begin(), ids.end());
    }
    if (!cpus.empty()) platform::allow_cpus(cpus);
}

// Call first thing in main(). Returns only if nothing needed changing or the re-exec failed
// (the program then runs with the runtime's defaults).
inline void use_short_openmp_spin(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("KMP_BLOCKTIME") ||
        std::getenv("SMOL_KEEP_OPENMP_WAIT"))
        return;
    ::setenv("GOMP_SPINCOUNT", "10000", 0);  // libgomp (GCC): iterations
    ::setenv("KMP_BLOCKTIME", "1", 0);       // libomp (clang): milliseconds
    allow_every_place();
    platform::restart_self(argv);
}

// The team size of a parallel region for a thread count carried with the work (LoadOptions::
// threads, SchedulerOptions::threads, the programs' -t): 0 means OpenMP's default, which is
// OMP_NUM_THREADS when set and every core otherwise. Regions say num_threads(thread_team(n))
// instead of the process calling omp_set_num_threads, so two pieces of work in one process
// can run on different counts and nothing outlives the work that asked for it.
inline int thread_team(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// The CPUs a team of `threads` (as thread_team reads it) may run on: its members' allowed CPUs
// together, ascending; empty where the system cannot say. What a user who set OMP_PROC_BIND or
// ran the program under taskset can check the threads against.
inline std::vector<int> team_cpus(int threads) {
    const int team = thread_team(threads);
    std::vector<std::vector<int>> each(static_cast<std::size_t>(team));
#pragma omp parallel num_threads(team)
    each[std::size_t(omp_get_thread_num())] = platform::allowed_cpus();
    std::vector<int> cpus;
    for (const auto& member : each) cpus.insert(cpus.end(), member.begin(), member.end());
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

}  // namespace smol
