#pragma once
// What the routes, the connection gate's hooks and shutdown share: one of each part, for the
// life of the process.

#include <atomic>

#include "connection_gate.hpp"
#include "grammar_cache.hpp"
#include "live_generations.hpp"
#include "metrics.hpp"
#include "served_model.hpp"
#include "server_options.hpp"

namespace smol_server {

struct ServerState {
    explicit ServerState(ServerOptions server_options) : options(std::move(server_options)) {}
    ServerState(const ServerState&) = delete;
    ServerState& operator=(const ServerState&) = delete;

    const ServerOptions options;
    ServedModel model;
    Metrics metrics;
    LiveGenerations live;  // replies still being written, which shutdown cancels and waits for
    GrammarCache grammars;
    std::atomic<const GateStats*> gate_stats{nullptr};  // the gate's counters, in /metrics once set
    // From SIGTERM on: /health and new requests get 503 while running replies finish (main.cpp).
    std::atomic<bool> draining{false};
};

}  // namespace smol_server
