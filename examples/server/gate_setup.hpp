#pragma once
// The connection gate (connection_gate.hpp) as smol-server sets it up in front of cpp-httplib.
// This is the whole seam between the two: the gate's limits come from the options, and three
// hooks make the requests it answers itself look like the server's (an OpenAI error body, the
// --cors fields, the same log line and counters). Besides these, the gate and the server behind
// it share only the client's address (the X-Smol-Client field, kClientField) and the gate's
// counters, which /metrics reads (ServerState::gate_stats).

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "api_request.hpp"
#include "connection_gate.hpp"
#include "gate_budget.hpp"
#include "messages_api.hpp"
#include "ollama_replies.hpp"
#include "origin_policy.hpp"
#include "outgoing_text.hpp"
#include "process_plumbing.hpp"
#include "server_options.hpp"
#include "server_state.hpp"

namespace smol_server {

// The gate's limits from the options; warns when --max-buffered cannot hold a --max-body request.
inline GateOptions gate_options_for(const ServerOptions& options) {
    GateOptions gate_options;
    gate_options.max_connections = options.max_connections;
    gate_options.header_timeout = std::chrono::seconds(options.header_timeout_s);
    gate_options.body_timeout = std::chrono::seconds(options.body_timeout_s);
    gate_options.keep_alive_timeout = std::chrono::seconds(options.keep_alive_timeout_s);
    gate_options.max_body_bytes = options.max_body_bytes;
    gate_options.max_buffered_bytes = options.max_buffered_mib << 20;
    gate_options.budget_wait = std::chrono::seconds(options.header_timeout_s);  // as long as a header may take
    // A request bigger than its share of the budget (three quarters, the rest is kept for small
    // requests) could never be let in: say so now rather than with a 413 later.
    if (const BufferBudget budget(gate_options.max_buffered_bytes);
        !budget.could_fit(options.max_body_bytes + gate_options.max_header_bytes + 1))
        std::fprintf(stderr,
                     "smol-server: warning: --max-buffered %zu MiB holds bodies of up to %zu KiB, less than "
                     "--max-body; larger ones get 413\n",
                     options.max_buffered_mib, (budget.cap_for(SIZE_MAX) - gate_options.max_header_bytes - 1) >> 10);
    return gate_options;
}

// How the gate's own answers are shaped, allowed and counted: as the routes do theirs.
inline GateHooks gate_hooks_for(ServerState& server) {
    GateHooks hooks;
    // In the shape the route would have used: Anthropic's on the Messages API's paths, ollama's under /api/.
    hooks.error_body = [](const http::Refusal& r, std::string_view target) {
        const std::string type = r.status == 503 ? "unavailable_error" : r.status >= 500 ? "server_error" : "invalid_request_error";
        const ApiError e{r.status, r.message, type, r.code};
        const std::string_view path = target.substr(0, target.find('?'));
        return to_wire(error_body_for_path(path, e));
    };
    hooks.reply_fields = "X-Smol-Replica: " + server.options.replica_name + "\r\n";  // a valid_replica_name
    hooks.cors_fields = [&server](std::string_view origin) {
        const std::string allowed = allowed_origin(server.options, origin);
        return allowed.empty() ? std::string() : "Access-Control-Allow-Origin: " + allowed + "\r\nVary: Origin\r\n";
    };
    // Counted and logged as the replies from behind the gate are (routes.hpp's logger).
    hooks.answered = [&server](const std::string& client, const std::string& method, const std::string& target,
                               const http::Refusal& r) {
        server.metrics.http_requests++;
        (r.status >= 500 ? server.metrics.http_server_errors : server.metrics.http_client_errors)++;
        std::fprintf(stderr, "%s %s %s %d (connection gate: %s)\n", loggable(client).c_str(), loggable(method).c_str(),
                     loggable(target).c_str(), r.status, r.code.c_str());
    };
    return hooks;
}

// httplib bound behind the gate, on the internal Unix socket; false (errno says why) when the
// socket cannot be made. httplib's listen backlog is fixed at 5 in the library, too few for a
// burst of requests the gate passes on at once, so the socket is listened on again with a
// longer queue (Linux applies the new length).
inline bool bind_behind_gate(httplib::Server& http, InternalSocket& internal) {
    int internal_fd = -1;
    http.set_address_family(AF_UNIX);
    http.set_socket_options([&internal_fd](int fd) { internal_fd = fd; });
    if (!internal.ok() || !http.bind_to_port(internal.path(), 80)) return false;
    ::listen(internal_fd, SOMAXCONN);
    http.set_socket_options([](int) {});  // the callback above points into this frame
    internal.detach();
    return true;
}

}  // namespace smol_server
