#pragma once
// The model the server answers with: a smol::Engine and the smol::Scheduler that runs every
// request on it. It loads on a thread of its own while the server already listens (the main
// thread stays free to answer a signal); until it is ready the API answers 503 model_loading.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "api_request.hpp"
#include "server_options.hpp"
#include "smol/smol.hpp"

namespace smol_server {

class ServedModel {
public:
    // Loads the model and starts the scheduler; prints how long it took and what it holds, or
    // why it failed. Whether it is ready.
    bool load_and_report(const ServerOptions& options) {
        bool loaded = false;
        try {
            const auto start = std::chrono::steady_clock::now();
            load(options);
            const smol::Scheduler& s = *scheduler();
            std::fprintf(stderr,
                         "smol-server: ready in %.1fs: %s, %d slots x %d tokens of context (%.1f MiB KV cache "
                         "each), %d threads\n",
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                         s.engine().info().config_name.c_str(), s.options().slots, s.context(),
                         double(s.cache_bytes_per_slot()) / (1 << 20),
                         s.engine().model().thread_team());
            loaded = true;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "smol-server: cannot load the model: %s\n", e.what());
        }
        std::fflush(stderr);
        return loaded;
    }

    // Everything the API needs; nullptr while the model is loading.
    smol::Scheduler* scheduler() {
        if (!ready_.load(std::memory_order_acquire)) return nullptr;
        return scheduler_.get();
    }
    smol::Scheduler& require_scheduler() {
        smol::Scheduler* s = scheduler();
        if (!s) reject(503, "the model is still loading; retry in a moment", "model_loading");
        return *s;
    }

    // The model's id in the API (--alias, else the file name); set once the model is ready.
    const std::string& id() const { return id_; }

private:
    void load(const ServerOptions& options) {
        smol::SchedulerOptions so;
        so.slots = options.parallel;
        so.context = options.context;
        so.max_queue = options.max_queue;
        so.cache_budget_bytes = options.cache_budget_mib << 20;
        so.speculation = options.speculation;
        smol::LoadOptions load;
        load.on_progress = smol::stderr_load_progress(std::filesystem::path(options.model_path).filename().string());
        load.context = options.context;
        load.rope_scaling = options.rope_scaling;
        load.cache_types = options.cache_types;
        load.repack = options.repack;
        load.threads = options.threads;
        auto engine = std::make_unique<smol::Engine>(options.model_path, load);
        const smol::ModelInfo& info = engine->info();
        if (info.rope_scaling.yarn())
            std::fprintf(stderr, "smol-server: RoPE scaling: %s%s\n", smol::describe(info.rope_scaling).c_str(),
                         info.rope_scaling_automatic ? " (the context is past the trained one)" : "");
        id_ = options.alias.empty() ? std::filesystem::path(options.model_path).filename().string() : options.alias;
        auto scheduler = std::make_unique<smol::Scheduler>(*engine, so);
        std::lock_guard lock(mutex_);
        engine_ = std::move(engine);
        scheduler_ = std::move(scheduler);
        ready_.store(true, std::memory_order_release);
    }

    std::mutex mutex_;
    std::unique_ptr<smol::Engine> engine_;  // declared before the scheduler, which uses it
    std::unique_ptr<smol::Scheduler> scheduler_;
    std::atomic<bool> ready_{false};
    std::string id_;
};

}  // namespace smol_server
