#pragma once
// The connection gate's server side: a whole request forwarded to the server behind on a
// connection of its own, and the reply relayed back to the client as it arrives, its end found
// from its framing so the client's connection can carry the next request.
//
// Part of ConnectionGate: connection_gate.hpp declares the class and includes this file at its end.

#include <sys/socket.h>
#include <sys/uio.h>

#include "connection_gate.hpp"

namespace smol_server {

inline void ConnectionGate::forward(Conn& c, std::size_t end) {
    // The body goes to the server from the buffer it arrived in (no copy): `in` becomes `fwd`,
    // freed once sent (finish_forwarded), so no connection keeps a request's buffer for life.
    c.to_up = http::forwarded_head(c.head, kClientField, c.client);
    c.to_up.shrink_to_fit();
    c.fwd = std::move(c.in);
    c.in = std::string();
    c.fwd_from = c.head.size;
    c.fwd_end = end;
    c.up_sent = 0;
    set_grant(c, c.grant + c.to_up.capacity());
    c.searched = 0;
    c.requests++;
    c.keep_alive = c.head.keep_alive && options_.keep_alive_timeout.count() > 0 &&
                   c.requests < options_.max_requests_per_connection && !draining_.load();
    c.phase = Phase::upstream;
    c.reply_head.clear();
    c.reply_started = false;
    c.reply_done = false;
    c.connect_until = GateClock::now() + std::chrono::seconds(5);
    c.deadline = GateClock::time_point::max();
    connect_upstream(c);
}

inline void ConnectionGate::connect_upstream(Conn& c) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (::connect(fd, reinterpret_cast<const sockaddr*>(&upstream_), sizeof upstream_) == 0 ||
                    errno == EINPROGRESS)) {
        c.up = fd;
        watch(c);
        return;
    }
    const int err = errno;
    if (fd >= 0) ::close(fd);
    // The server's accept queue is full (a burst of requests), or descriptors ran out:
    // try again shortly.
    if ((err == EAGAIN || err == EMFILE || err == ENFILE) && GateClock::now() < c.connect_until) {
        set_deadline(c, GateClock::now() + std::chrono::milliseconds(5));
        watch(c);
        return;
    }
    c.phase = Phase::body;  // so the log names the request
    refuse(c, {503, "server_unavailable", std::string("the server cannot take the request: ") + std::strerror(err)});
}

inline void ConnectionGate::on_upstream(Conn& c, std::uint32_t ev) {
    if (c.up_unsent()) {
        if (ev & (EPOLLERR | EPOLLHUP)) return upstream_ended(c);
        while (c.up_unsent()) {
            // The forwarded header, then the body from the buffer it arrived in.
            iovec parts[2];
            int count = 0;
            if (c.up_sent < c.to_up.size())
                parts[count++] = {c.to_up.data() + c.up_sent, c.to_up.size() - c.up_sent};
            const std::size_t body_sent = c.up_sent - std::min(c.up_sent, c.to_up.size());
            if (c.fwd_from + body_sent < c.fwd_end)
                parts[count++] = {c.fwd.data() + c.fwd_from + body_sent, c.fwd_end - c.fwd_from - body_sent};
            msghdr message{};
            message.msg_iov = parts;
            message.msg_iovlen = std::size_t(count);
            const ssize_t n = ::sendmsg(c.up, &message, MSG_NOSIGNAL);
            if (n > 0) {
                c.up_sent += std::size_t(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            return upstream_ended(c);
        }
        finish_forwarded(c);
        if (c.client_eof) ::shutdown(c.up, SHUT_WR);
        watch(c);
        return;
    }
    char buffer[65536];
    while (c.reply_done || c.pending() < options_.reply_buffer_bytes) {
        const ssize_t n = ::recv(c.up, buffer, sizeof buffer, 0);
        if (n > 0) {
            if (c.reply_done) continue;  // nothing belongs after the reply
            if (!relay(c, std::string_view(buffer, std::size_t(n)))) return;
            if (c.reply_done) {
                c.reply_done_at = GateClock::now();
                set_deadline(c, upstream_deadline(c));
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return upstream_ended(c);  // the server closed its side (or it failed)
    }
    flush(c);
}

// When a relaying connection next needs looking at: a client that takes nothing of its
// reply for send_timeout is dropped; after the reply's last byte, the server's close (it
// logs the request first, so a client that saw its reply finds it in the log and in
// /metrics) is waited for a second at most.
inline GateClock::time_point ConnectionGate::upstream_deadline(const Conn& c) const {
    GateClock::time_point t = GateClock::time_point::max();
    if (c.pending() > 0) t = c.last_progress + options_.send_timeout;
    if (c.reply_done && c.up >= 0) t = std::min(t, c.reply_done_at + std::chrono::seconds(1));
    return t;
}

// Takes bytes of the reply; false once the connection is gone.
inline bool ConnectionGate::relay(Conn& c, std::string_view bytes) {
    if (!c.reply_started) {
        c.reply_head.append(bytes);
        const http::ResponseHeadParse p = http::parse_response_head(c.reply_head, 64 << 10);
        if (p.state == http::ResponseHeadParse::State::incomplete) return true;
        const auto framing = p.state == http::ResponseHeadParse::State::complete
                                 ? http::response_body(p.head, c.head.method)
                                 : std::nullopt;
        if (!framing) {
            drop(c);
            return false;
        }
        c.reply_started = true;
        // The client can find the end of this reply and keep the connection only if the
        // reply says where it ends (a chunked one only for an HTTP/1.1 client).
        if (framing->kind == http::BodyFraming::Kind::until_close ||
            (framing->kind == http::BodyFraming::Kind::chunked && c.head.version != "HTTP/1.1"))
            c.keep_alive = false;
        const int seconds = int((options_.keep_alive_timeout.count() + 999) / 1000);
        queue(c, http::client_response_head(p.head, c.keep_alive ? seconds : 0,
                                            options_.max_requests_per_connection - c.requests));
        c.reply_body = http::BodyScanner(*framing, UINT64_MAX);
        const std::string rest = c.reply_head.substr(p.head.size);
        c.reply_head.clear();
        c.reply_head.shrink_to_fit();
        if (c.reply_body.empty()) {
            c.reply_done = true;
            return true;
        }
        return rest.empty() || relay(c, rest);
    }
    const auto step = c.reply_body.feed(bytes);
    queue(c, bytes.substr(0, step.used));
    if (step.status == http::BodyScanner::Status::done) c.reply_done = true;
    else if (step.status != http::BodyScanner::Status::more) {
        drop(c);  // the server's reply does not parse: nothing sensible to pass on
        return false;
    }
    return true;
}

// The server's side closed (or failed) before the gate closed it.
inline void ConnectionGate::upstream_ended(Conn& c) {
    close_upstream(c);
    finish_forwarded(c);  // what was not sent never will be
    if (!c.reply_started) {
        // Nothing of a reply came. For a client that shut down its sending side that is
        // httplib taking it for gone (it writes nothing to a connection it sees closed), as
        // when clients reached it directly; otherwise the server could not take the request.
        if (c.client_eof) return drop(c);
        c.phase = Phase::body;
        return refuse(c, {502, "no_reply", "the server closed the request without a reply"});
    }
    // A reply read until the close is whole now; any other is cut off, and the client can
    // only tell by the connection closing after what did arrive.
    if (!c.reply_done) c.keep_alive = false;
    c.reply_done = true;
    flush(c);
}

// The reply went out whole: wait for the next request, or close.
inline bool ConnectionGate::next_request(Conn& c) {
    close_upstream(c);
    finish_forwarded(c);  // if the server replied before it took the whole request
    if (!c.keep_alive || draining_.load()) {
        // Shut down our side and let the client read to the end before the socket closes.
        c.phase = Phase::closing;
        leave_budget(c);
        ::shutdown(c.fd, SHUT_WR);
        set_deadline(c, GateClock::now() + std::chrono::seconds(2));
        watch(c);
        return true;
    }
    c.phase = Phase::header;
    c.searched = 0;
    set_deadline(c, GateClock::now() + (c.in.empty() ? options_.keep_alive_timeout : options_.header_timeout));
    watch(c);
    const std::uint64_t id = c.id;
    // What the client sent meanwhile: a pipelined request, or its end (read now, as no
    // event for it may come again).
    if (c.client_eof) on_client_readable(c, EPOLLIN);
    else if (!c.in.empty()) advance(c);
    return conns_.count(id) > 0;
}

}  // namespace smol_server
