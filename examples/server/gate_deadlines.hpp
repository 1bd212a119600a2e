#pragma once
// The connection gate's deadlines: a header or body not whole in time (408), a kept-alive
// connection idle too long, a wait for budget room past `budget_wait` (503), a client that
// takes none of its reply for `send_timeout`, a server that does not close after its reply.
//
// Part of ConnectionGate: connection_gate.hpp declares the class and includes this file at its end.

#include "connection_gate.hpp"

namespace smol_server {

inline void ConnectionGate::check_deadlines() {
    const auto now = GateClock::now();
    next_check_ = GateClock::time_point::max();
    if (accept_paused_until_ != GateClock::time_point{} && listen_fd_ >= 0) {
        if (now >= accept_paused_until_) {
            add(listen_fd_, key(0, Kind::listener), EPOLLIN);
            accept_paused_until_ = {};
        } else {
            next_check_ = accept_paused_until_;
        }
    }
    std::vector<std::uint64_t> due;
    // Deadlines a few milliseconds off are taken together, rather than waking for each.
    const auto soon = now + std::chrono::milliseconds(10);
    for (const auto& [id, c] : conns_) {
        if (c->deadline <= soon) due.push_back(id);
        else next_check_ = std::min(next_check_, c->deadline);
    }
    for (std::uint64_t id : due) {
        const auto it = conns_.find(id);
        if (it == conns_.end()) continue;
        Conn& c = *it->second;
        if (c.waiting && (c.phase == Phase::header || c.phase == Phase::body)) {
            // Not the client's fault: it may try again once the big requests are through.
            stats_.budget_refused++;
            refuse(c, {503, "server_busy", "the server holds as many request bytes as it may; retry in a moment"});
            continue;
        }
        switch (c.phase) {
        case Phase::header:
            if (!c.in.empty()) {
                stats_.timed_out++;
                refuse(c, {408, "request_timeout",
                           "the request header did not arrive within " + seconds(options_.header_timeout)});
            } else {
                (c.requests > 0 ? stats_.idle_closed : stats_.timed_out)++;
                drop(c);
            }
            break;
        case Phase::body:
            stats_.timed_out++;
            refuse(c, {408, "request_timeout",
                       "the request body did not arrive within " + seconds(options_.body_timeout)});
            break;
        case Phase::upstream:
            if (c.up < 0 && !c.reply_done) {
                c.deadline = GateClock::time_point::max();
                connect_upstream(c);  // a retry
            } else if (c.pending() > 0 && now - c.last_progress >= options_.send_timeout) {
                drop(c);  // the client stopped reading
            } else if (c.reply_done && c.up >= 0 && now >= c.reply_done_at + std::chrono::seconds(1)) {
                close_upstream(c);  // the server did not close after its reply: go on without
                c.deadline = upstream_deadline(c);
                flush(c);
            } else {
                set_deadline(c, upstream_deadline(c));
            }
            break;
        case Phase::closing:
            drop(c);
            break;
        }
    }
}

inline std::string ConnectionGate::seconds(std::chrono::milliseconds d) {
    const long long ms = d.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

}  // namespace smol_server
