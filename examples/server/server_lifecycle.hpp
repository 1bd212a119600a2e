#pragma once
// smol-server's life after startup: the three threads beside main (httplib's listener, the
// connection gate's event loop, the model loader), the wait for a stop signal, the drain a
// SIGTERM starts (deploy/README.md) and the shutdown. main.cpp calls them in that order.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <thread>

#include "connection_gate.hpp"
#include "process_plumbing.hpp"
#include "server_options.hpp"
#include "server_state.hpp"

namespace smol_server {

// The threads beside main; each wakes main (process_plumbing.hpp) when it ends. It must stay
// where it was made: the threads refer to it.
struct ServerThreads {
    httplib::Server& http;
    ConnectionGate& gate;
    std::atomic<bool> listener_done{false};
    std::atomic<bool> gate_done{false};
    std::atomic<bool> load_failed{false};
    std::thread listener;
    std::thread gate_thread;
    std::thread loader;

    ServerThreads(httplib::Server& http_server, ConnectionGate& connection_gate) : http(http_server), gate(connection_gate) {}
    ServerThreads(const ServerThreads&) = delete;
    ServerThreads& operator=(const ServerThreads&) = delete;

    void start(ServerState& server, const ServerOptions& options) {
        listener = std::thread([this] {
            http.listen_after_bind();
            listener_done.store(true);
            wake_main(kWakeListenerEnd);
        });
        gate_thread = std::thread([this] {
            try {
                gate.run();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "smol-server: the connection gate failed: %s\n", e.what());
            }
            gate_done.store(true);
            wake_main(kWakeListenerEnd);
        });
        // The model loads beside the main thread, which stays free to answer a signal meanwhile.
        loader = std::thread([this, &server, &options] {
            if (!server.model.load_and_report(options)) load_failed.store(true);
            wake_main(kWakeLoaded);
        });
    }

    // Stops the listener; true once it returned before `deadline`. stop() does nothing until
    // the listener thread is inside its accept loop, hence the retries.
    bool stop_listener(Clock::time_point deadline) {
        while (!listener_done.load()) {
            http.stop();
            if (Clock::now() >= deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return true;
    }
};

// Waits for SIGINT or SIGTERM, joining the loader once the model is in. Whether the model was
// still loading when the signal came; nullopt when loading failed (the threads are stopped and
// joined: the server exits with 1). The listener or the gate ending exits the process at once.
inline std::optional<bool> wait_for_stop_signal(ServerThreads& threads, ServerState& server, InternalSocket& internal) {
    bool loading = true;
    while (true) {
        const char why = wait_for_wake();
        if (why == kWakeLoaded && loading) {
            loading = false;
            threads.loader.join();
            if (!threads.load_failed.load()) continue;
            threads.gate.finish(Clock::now() + std::chrono::seconds(1));
            threads.gate_thread.join();
            threads.stop_listener(Clock::now() + std::chrono::seconds(5));
            threads.listener.join();
            return std::nullopt;
        }
        if (why == kWakeListenerEnd) {
            std::fprintf(stderr, "smol-server: the %s stopped unexpectedly\n",
                         threads.gate_done.load() ? "connection gate" : "HTTP listener");
            std::fflush(stderr);
            internal.remove();
            std::_Exit(1);  // the loader may still be reading the model; nothing else to keep
        }
        if (why == kWakeSignal) break;
    }
    // A signal that came between the model becoming ready and the loader's wake-up (a client
    // may already have been served) is a shutdown of a loaded server: the loader has only its
    // message left to print.
    if (loading && server.model.scheduler()) {
        threads.loader.join();
        loading = false;
    }
    return loading;
}

// SIGTERM is how a service manager or a balancer's deploy stops a replica (deploy/README.md):
// first a drain, where /health and new requests get 503 while the replies under way finish,
// up to --drain-timeout; a second signal cuts it short. SIGINT (Ctrl-C) skips it.
inline void drain_replies(ServerState& server, ConnectionGate& gate, const ServerOptions& options) {
    server.live.begin_drain();  // new requests get 503; those admitted before are waited for
    server.draining.store(true);
    gate.begin_shutdown();  // kept-alive connections close, so their next requests go elsewhere
    arm_shutdown_handlers();
    const std::size_t under_way = server.live.under_way();
    std::fprintf(stderr, "smol-server: SIGTERM: draining: %zu repl%s under way may finish within %d s; new requests get 503\n",
                 under_way, under_way == 1 ? "y" : "ies", options.drain_timeout_s);
    std::fflush(stderr);
    const auto deadline = Clock::now() + std::chrono::seconds(options.drain_timeout_s);
    bool cut_short = false;
    while (server.live.under_way() > 0 && Clock::now() < deadline && !cut_short) {
        const char why = wait_for_wake(100);
        cut_short = why == kWakeSignal || why == kWakeListenerEnd;
    }
    const std::size_t left = server.live.under_way();
    if (left == 0) std::fprintf(stderr, "smol-server: drained: every reply under way finished\n");
    else
        std::fprintf(stderr, "smol-server: %s with %zu repl%s under way\n",
                     cut_short ? "drain cut short by a second signal" : "drain timeout", left, left == 1 ? "y" : "ies");
    std::fflush(stderr);
}

// Graceful shutdown: chat requests get 503 from now on, running generations are cancelled
// (each ends within a token and its client gets an error event or body saying why), the
// gate closes idle connections and lets the last replies through, then httplib stops.
// Stopping httplib first would cut the replies off: it stops writing chunked responses as
// soon as its socket is closed. The process's exit status.
inline int shut_down(ServerThreads& threads, ServerState& server, InternalSocket& internal, int stop_signal,
                     bool loading) {
    const auto start = Clock::now();
    threads.gate.begin_shutdown();
    const std::size_t cancelled = server.live.close_and_cancel();
    const char* signal_name = stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
    if (loading) std::fprintf(stderr, "smol-server: %s while loading the model; exiting\n", signal_name);
    else
        std::fprintf(stderr, "smol-server: %s: no longer taking requests; cancelled %zu generation%s; exiting\n",
                     signal_name, cancelled, cancelled == 1 ? "" : "s");
    std::fflush(stderr);
    server.live.wait_until_empty(start + std::chrono::milliseconds(750));
    const bool drained = threads.gate.finish(start + std::chrono::milliseconds(1000));
    if (drained) threads.gate_thread.join();
    const bool stopped = drained && threads.stop_listener(start + std::chrono::milliseconds(1200));
    if (!stopped || loading) {
        // A reply the client does not read, or a model being read (which cannot be
        // interrupted), has nothing left to lose: exit now rather than keep the caller waiting.
        std::fflush(stderr);
        internal.remove();
        std::_Exit(0);
    }
    threads.listener.join();
    return 0;  // the scheduler's destructor finishes its current step and joins its worker
}

}  // namespace smol_server
