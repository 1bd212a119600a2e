#pragma once
// The connection gate's client side: reading a request into the connection's share of the budget,
// finding its end by its framing (header, then a body by length or chunks; http_framing.hpp),
// refusing what may not pass with an answer of the gate's own, and writing to the client.
//
// Part of ConnectionGate: connection_gate.hpp declares the class and includes this file at its end.

#include <sys/socket.h>

#include "connection_gate.hpp"

namespace smol_server {

inline void ConnectionGate::on_client(Conn& c, std::uint32_t ev) {
    if (ev & EPOLLERR) return drop(c);  // reset
    if ((ev & EPOLLOUT) && !flush(c)) return;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) on_client_readable(c, ev);
}

inline void ConnectionGate::on_client_readable(Conn& c, std::uint32_t ev) {
    if (c.phase == Phase::upstream) {
        // Only a hang-up is looked for while a reply is under way (what the client
        // pipelines meanwhile waits in the socket); the server's side is shut down the same
        // way, so the server sees the client leave as it did when they were connected.
        if (ev & EPOLLHUP) return drop(c);
        c.client_eof = true;
        if (c.up >= 0 && !c.up_unsent()) ::shutdown(c.up, SHUT_WR);
        watch(c);
        return;
    }
    if (c.waiting) {
        // Waiting for room in the budget: a reset ends it, a hang-up is noted (the request
        // may be whole in the socket, and the client waiting for its reply).
        if (ev & EPOLLHUP) return drop(c);
        c.peer_shut_seen = true;
        watch(c);
        return;
    }
    if ((ev & EPOLLIN) && c.between_requests())
        set_deadline(c, GateClock::now() + options_.header_timeout);  // a kept-alive connection's next request
    char buffer[16384];
    while (true) {
        // Bytes are read only into the connection's share of the budget; what does not fit
        // stays in the socket until the share grows (advance() asks for that).
        std::size_t room = sizeof buffer;
        if (c.phase != Phase::closing) {
            if (c.in.size() >= c.grant && !make_room(c)) return;
            room = std::min(room, c.grant - std::min(c.grant, c.in.size()));
            if (room == 0) break;
        }
        const ssize_t n = ::recv(c.fd, buffer, room, 0);
        if (n > 0) {
            if (c.phase == Phase::closing) continue;  // dropped
            c.in.append(buffer, std::size_t(n));
            if (c.in.size() >= c.grant) break;  // share full: see what it holds first
            continue;
        }
        if (n == 0) {
            c.client_eof = true;
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return drop(c);
    }
    if (c.phase == Phase::closing) {
        if (c.client_eof && c.pending() == 0) drop(c);
        else watch(c);
        return;
    }
    advance(c);
}

// Moves a connection on as far as the bytes it has allow: header, body, forwarded.
inline void ConnectionGate::advance(Conn& c) {
    if (c.phase == Phase::header) {
        if (c.in.empty()) {
            if (c.client_eof) drop(c);
            return;
        }
        http::RequestHeadParse p =
            http::parse_request_head(c.in, options_.max_header_bytes, options_.max_body_bytes, &c.searched);
        if (p.state == http::RequestHeadParse::State::refused) {
            if (!p.head.fields.empty()) {  // a whole header refused for what it says (413, 501, ...)
                c.head = std::move(p.head);
                c.phase = Phase::body;  // so the log names the request and CORS sees its origin
            }
            return refuse(c, p.refusal);
        }
        if (p.state == http::RequestHeadParse::State::incomplete) {
            if (c.client_eof) drop(c);
            else if (c.in.size() >= c.grant) make_room(c);  // more for the header, or wait
            return;
        }
        c.head = std::move(p.head);
        c.body = http::BodyScanner(c.head.body, options_.max_body_bytes);
        c.body_scanned = 0;
        c.phase = Phase::body;
        set_deadline(c, GateClock::now() + options_.body_timeout);
        // The whole request's share is taken now (a chunked body's as it grows), so a request
        // let in can always be read to its end. One that waits for room gets its 100 Continue
        // once let in (admit_waiters).
        if (!make_room(c)) return;
        if (c.head.expect_continue && c.in.size() == c.head.size) {
            queue(c, "HTTP/1.1 100 Continue\r\n\r\n");
            if (!flush(c)) return;
        }
    }
    if (c.phase != Phase::body) return;
    std::size_t end = c.head.size;
    if (!c.body.empty()) {
        const std::size_t from = c.head.size + c.body_scanned;
        const auto step = c.body.feed(std::string_view(c.in).substr(from));
        c.body_scanned += step.used;
        using Status = http::BodyScanner::Status;
        if (step.status == Status::invalid) return refuse(c, http::bad_request("malformed chunked request body"));
        if (step.status == Status::too_large)
            return refuse(c, {413, "payload_too_large", "the request body is larger than the server accepts"});
        if (step.status == Status::more) {
            if (c.client_eof) drop(c);
            else if (c.in.size() >= c.grant) make_room(c);  // a chunked body past its share
            return;
        }
        end = c.head.size + c.body_scanned;
    }
    forward(c, end);
}

// Answers a request with an error of the gate's own and closes the connection.
inline void ConnectionGate::refuse(Conn& c, const http::Refusal& r) {
    const bool head_known = c.phase == Phase::body;
    hooks_.answered(c.client, head_known ? c.head.method : "-", head_known ? c.head.target : "-", r);
    // A browser shows a page its cross-origin error only with the CORS fields a reply from
    // the server behind would carry.
    std::string cors;
    if (head_known && hooks_.cors_fields)
        for (const http::Field& f : c.head.fields)
            if (http::detail::iequals(f.name, "Origin")) cors = hooks_.cors_fields(f.value);
    c.phase = Phase::closing;
    leave_budget(c);
    c.out.erase(0, c.out_sent);
    c.out_sent = 0;
    queue(c, http::gate_response(r.status, "application/json", hooks_.error_body(r, head_known ? c.head.target : ""),
                                 gate_refusal_fields(hooks_, r) + cors));
    set_deadline(c, GateClock::now() + std::chrono::seconds(2));
    if (!flush(c)) return;
    watch(c);
}

// Writes what is pending to the client; false once the connection is gone.
inline bool ConnectionGate::flush(Conn& c) {
    while (c.pending() > 0) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.pending(), MSG_NOSIGNAL);
        if (n > 0) {
            c.out_sent += std::size_t(n);
            c.last_progress = GateClock::now();
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        drop(c);  // the client left
        return false;
    }
    if (c.pending() == 0) {
        c.out.clear();
        c.out_sent = 0;
        if (c.out.capacity() > (64 << 10)) c.out.shrink_to_fit();
        if (c.phase == Phase::closing) {
            if (c.client_eof) {
                drop(c);
                return false;
            }
            ::shutdown(c.fd, SHUT_WR);  // the refusal is out; the client reads it, then EOF
        } else if (c.phase == Phase::upstream && c.reply_done && c.up < 0) {
            return next_request(c);
        }
    } else if (c.phase == Phase::upstream) {
        set_deadline(c, upstream_deadline(c));
    }
    watch(c);
    return true;
}

}  // namespace smol_server
