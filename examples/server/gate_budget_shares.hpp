#pragma once
// The connection gate's part of the budget for request bytes: the share each connection holds,
// taken before it reads (a header's, then the whole request's), waited for when there is no
// room, given back once the request is at the server. The accounting itself is gate_budget.hpp.
//
// Part of ConnectionGate: connection_gate.hpp declares the class and includes this file at its end.

#include "connection_gate.hpp"

namespace smol_server {

// `s` with the same bytes in a buffer of exactly `capacity` bytes (appending or reserve()
// would round the capacity up, past the share it was taken for).
inline void ConnectionGate::set_capacity(std::string& s, std::size_t capacity) {
    std::string fresh;
    fresh.reserve(std::max(capacity, s.size()));
    fresh.append(s);
    s.swap(fresh);
}

inline void ConnectionGate::free_buffer(std::string& s) { std::string().swap(s); }

inline void ConnectionGate::publish_budget() { stats_.buffered.store(budget_.used()); }

// Sets `c`'s share to what it holds now, giving back (or, for the few bytes of a forwarded
// header, taking without asking) the difference.
inline void ConnectionGate::set_grant(Conn& c, std::size_t bytes) {
    if (bytes < c.grant) {
        budget_.give(c.grant - bytes);
        budget_freed_ = true;
    } else {
        budget_.take(bytes - c.grant);
    }
    c.grant = bytes;
    publish_budget();
}

// Makes sure `c` holds the share of the budget its request needs next: more for a header
// that filled its share, the whole request once the header says how long it is, more for a
// chunked body that filled its share. False when it has to wait for room instead, or was
// refused (and may be gone): the caller leaves it alone then.
inline bool ConnectionGate::make_room(Conn& c) {
    std::size_t want = c.grant;
    if (c.phase == Phase::header) {
        const std::size_t header_share = options_.max_header_bytes + 1;  // one past: enough to see a 431
        if (c.in.size() >= c.grant)
            want = std::max(c.grant, c.grant < kFirstShare ? std::min(kFirstShare, header_share) : header_share);
    } else if (c.phase == Phase::body) {
        if (c.head.body.kind == http::BodyFraming::Kind::length) {
            want = c.head.size + std::size_t(c.head.body.length);  // at most max_body_bytes (checked)
        } else if (c.head.body.kind == http::BodyFraming::Kind::chunked && c.in.size() >= c.grant) {
            // Up to one byte past the body limit (the scanner's 413), or the most a big
            // request can ever have; a body that fills that without ending cannot fit.
            const std::size_t most = std::min(c.head.size + std::size_t(options_.max_body_bytes) + 1,
                                              budget_.cap_for(SIZE_MAX));
            want = std::min(most, std::max(2 * c.grant, c.in.size() + (64 << 10)));
            if (want <= c.grant) want = SIZE_MAX;
        }
    }
    if (want <= c.grant) return true;
    if (!budget_.could_fit(want)) {
        stats_.budget_refused++;
        refuse(c, {413, "payload_too_large",
                   "the request is larger than the server may hold at once (" +
                       std::to_string(budget_.limit() >> 10) + " KiB for all requests together)"});
        return false;
    }
    if (!budget_.try_take(want - c.grant, want)) {
        // No room: read nothing more until some is given back; the deadline still runs.
        c.waiting = true;
        c.want = want;
        budget_.wait(c.id, want - c.grant, want);
        stats_.budget_waits++;
        c.phase_deadline = c.deadline;
        set_deadline(c, std::min(c.deadline, GateClock::now() + options_.budget_wait));
        watch(c);
        return false;
    }
    set_capacity(c.in, want);
    c.grant = want;
    publish_budget();
    return true;
}

// Lets in the connections waiting for room that fit now (run() calls it once bytes were
// given back, outside any other connection's handling).
inline void ConnectionGate::admit_waiters() {
    if (!budget_freed_) return;
    budget_freed_ = false;
    if (budget_.waiting() == 0) return;
    for (const auto& [id, more] : budget_.admit()) {
        const auto it = conns_.find(id);
        if (it == conns_.end()) {
            budget_.give(more);
            continue;
        }
        Conn& c = *it->second;
        c.waiting = false;
        c.peer_shut_seen = false;
        set_capacity(c.in, c.grant + more);
        c.grant += more;
        set_deadline(c, c.phase_deadline);
        watch(c);  // reading again: what the client sent meanwhile waits in the socket
        if (c.phase == Phase::body && c.head.expect_continue && c.in.size() == c.head.size) {
            queue(c, "HTTP/1.1 100 Continue\r\n\r\n");
            flush(c);
        }
    }
    publish_budget();
}

// The request sent to the server whole: its buffer is freed, and what the client pipelined
// after it goes back to `in`.
inline void ConnectionGate::finish_forwarded(Conn& c) {
    if (c.fwd.empty() && c.to_up.empty()) return;
    if (c.fwd_end < c.fwd.size()) c.in.insert(0, c.fwd, c.fwd_end, std::string::npos);
    free_buffer(c.fwd);
    free_buffer(c.to_up);
    c.fwd_from = c.fwd_end = c.up_sent = 0;
    set_grant(c, c.in.size());
}

// Gives back all `c` holds of the budget and frees its request buffers (it is refused or gone).
inline void ConnectionGate::leave_budget(Conn& c) {
    if (c.waiting) {
        budget_.forget(c.id);  // which may let in big requests that waited behind it
        c.waiting = false;
        budget_freed_ = true;
    }
    free_buffer(c.in);
    free_buffer(c.fwd);
    free_buffer(c.to_up);
    c.fwd_from = c.fwd_end = c.up_sent = 0;
    c.searched = 0;
    set_grant(c, 0);
}

}  // namespace smol_server
