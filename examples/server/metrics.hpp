#pragma once
// What /metrics reports, in Prometheus's text format: the server's own request counters, the
// connection gate's counters (connection_gate.hpp) and the scheduler's statistics.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "connection_gate.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// Counted by the routes, the reply adapters (errors after a 200) and the gate's own answers.
struct Metrics {
    std::atomic<std::uint64_t> http_requests{0};
    std::atomic<std::uint64_t> http_client_errors{0};
    std::atomic<std::uint64_t> http_server_errors{0};
    std::atomic<std::uint64_t> chat_completions{0};
    std::atomic<std::uint64_t> text_completions{0};
    std::atomic<std::uint64_t> messages{0};   // Anthropic Messages API requests (/v1/messages)
    std::atomic<std::uint64_t> responses{0};  // OpenAI Responses API requests (/v1/responses)
    std::atomic<std::uint64_t> ollama{0};     // ollama API generations (/api/chat, /api/generate)
};

// Which replica this is, for a balancer or a dashboard over several (deploy/README.md).
struct ReplicaState {
    std::string_view name;  // --replica-name: letters, digits and "-_.:" only (checked at startup)
    bool draining = false;  // SIGTERM came: running replies finish, new ones are refused
};

// Appends metrics to a page in Prometheus's text format: each its HELP and TYPE lines, then its value.
struct MetricLines {
    std::string& out;
    void operator()(const char* name, const char* type, const char* help, double value) const {
        char line[64];
        std::snprintf(line, sizeof line, "%.6g", value);
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + line +
               "\n";
    }
};

// The connection gate's counters.
inline void append_gate_metrics(std::string& out, const GateStats& gate) {
    const MetricLines metric{out};
    metric("smol_connections_open", "gauge", "client connections open", double(gate.open.load()));
    metric("smol_connections_accepted_total", "counter", "client connections accepted", double(gate.accepted.load()));
    metric("smol_connections_refused_total", "counter", "client connections turned away (503) at --max-connections",
           double(gate.refused.load()));
    metric("smol_connections_timed_out_total", "counter",
           "connections closed because a request header or body was not whole in time (--header-timeout, "
           "--body-timeout)",
           double(gate.timed_out.load()));
    metric("smol_connections_idle_closed_total", "counter",
           "kept-alive connections closed after --keep-alive-timeout without a next request",
           double(gate.idle_closed.load()));
    metric("smol_gate_buffered_bytes", "gauge",
           "request bytes the connection gate holds or has set aside for requests arriving (--max-buffered)",
           double(gate.buffered.load()));
    metric("smol_gate_buffer_budget_bytes", "gauge", "the most request bytes the gate holds at once (--max-buffered)",
           double(gate.buffer_budget.load()));
    metric("smol_gate_budget_waits_total", "counter",
           "times a request waited, unread, for room in --max-buffered",
           double(gate.budget_waits.load()));
    metric("smol_gate_budget_refused_total", "counter",
           "requests refused for --max-buffered (503 after waiting too long, 413 if larger than it allows)",
           double(gate.budget_refused.load()));
}

// The scheduler's counters and gauges.
inline void append_scheduler_metrics(std::string& out, const smol::SchedulerStats& st) {
    const MetricLines metric{out};
    metric("smol_requests_finished_total", "counter", "generation requests that ran to their end",
           double(st.requests_finished));
    metric("smol_requests_cancelled_total", "counter", "generation requests cancelled (client left or stopped)",
           double(st.requests_cancelled));
    metric("smol_requests_rejected_total", "counter", "generation requests refused (queue full, prompt too long)",
           double(st.requests_rejected));
    metric("smol_prompt_tokens_total", "counter", "prompt tokens processed", double(st.prompt_tokens));
    metric("smol_prompt_tokens_cached_total", "counter", "prompt tokens reused from KV caches",
           double(st.cached_tokens));
    metric("smol_tokens_generated_total", "counter", "tokens generated", double(st.generated_tokens));
    metric("smol_forward_passes_total", "counter", "batched forward passes", double(st.forward_calls));
    metric("smol_draft_tokens_total", "counter", "tokens drafted by speculative decoding and checked",
           double(st.drafted_tokens));
    metric("smol_draft_tokens_accepted_total", "counter", "drafted tokens the model picked too",
           double(st.accepted_tokens));
    metric("smol_busy_seconds_total", "counter", "seconds spent computing", st.busy_seconds);
    metric("smol_tokens_per_second", "gauge", "recent generation throughput over all sessions",
           st.generation_tokens_per_second);
    metric("smol_queue_depth", "gauge", "requests waiting for a slot", st.queue_depth);
    metric("smol_active_sessions", "gauge", "requests generating now", st.active_slots);
    metric("smol_slots", "gauge", "requests that can generate at once", st.slots);
    metric("smol_free_slots", "gauge", "slots free for a new request now (smol_slots - smol_active_sessions)",
           std::max(0, st.slots - st.active_slots));
    metric("smol_kv_cache_bytes", "gauge", "KV cache memory allocated", double(st.cache_bytes));
}

// The /metrics page. `gate` is nullptr until the gate runs, `scheduler` until the model is
// loaded; their lines are left out until then.
inline std::string metrics_text(const Metrics& metrics, const ReplicaState& replica, const GateStats* gate,
                                const smol::Scheduler* scheduler) {
    std::string out;
    out += "# HELP smol_replica_info this replica's name (--replica-name), as a label\n# TYPE smol_replica_info gauge\n"
           "smol_replica_info{replica=\"" + std::string(replica.name) + "\"} 1\n";
    const MetricLines metric{out};
    metric("smol_http_requests_total", "counter", "HTTP requests received", double(metrics.http_requests.load()));
    metric("smol_http_client_errors_total", "counter", "HTTP responses with a 4xx status",
           double(metrics.http_client_errors.load()));
    metric("smol_http_server_errors_total", "counter",
           "HTTP responses with a 5xx status, or with an error body after generation failed under a 200",
           double(metrics.http_server_errors.load()));
    metric("smol_chat_completions_total", "counter", "chat completion requests accepted",
           double(metrics.chat_completions.load()));
    metric("smol_text_completions_total", "counter", "text completion requests accepted (/v1/completions)",
           double(metrics.text_completions.load()));
    metric("smol_messages_total", "counter", "Anthropic Messages API requests accepted (/v1/messages)",
           double(metrics.messages.load()));
    metric("smol_responses_total", "counter", "OpenAI Responses API requests accepted (/v1/responses)",
           double(metrics.responses.load()));
    metric("smol_ollama_total", "counter", "ollama API generations accepted (/api/chat and /api/generate)",
           double(metrics.ollama.load()));
    if (gate) append_gate_metrics(out, *gate);
    metric("smol_model_loaded", "gauge", "1 once the model is ready", scheduler ? 1 : 0);
    metric("smol_draining", "gauge", "1 from SIGTERM on: running replies finish, new requests get 503",
           replica.draining ? 1 : 0);
    if (!scheduler) return out;
    append_scheduler_metrics(out, scheduler->stats());
    return out;
}

}  // namespace smol_server
