#pragma once
// smol-server's front door: one thread with epoll (Linux) that owns the public listening
// socket and every client connection, and passes only whole requests to the HTTP server
// behind it (cpp-httplib, listening on a Unix socket only this process can reach).
//
// Why: cpp-httplib 0.11.4 gives each connection a worker thread for its whole life and has no
// deadline for a whole request header, so a few dozen clients that send half a header (or one
// line every second) hold every worker and nobody else is answered. Here a connection costs a
// small buffer until its request is complete:
//   - a request header must arrive whole within `header_timeout` of the connection opening (or
//     of its first byte, after a reply on a kept-alive connection), its body within
//     `body_timeout` of the header; past that the client gets 408 and the connection closes;
//   - a kept-alive connection with no request started is closed after `keep_alive_timeout`;
//   - at most `max_connections` are open; the next ones get 503 and are closed;
//   - a header past `max_header_bytes` gets 431, a body past `max_body_bytes` 413, framing the
//     gate cannot be sure of (see http_framing.hpp) 400 or 501;
//   - all connections together hold at most `max_buffered_bytes` of requests (gate_budget.hpp):
//     a connection takes its share before it reads, the whole request once its header says how
//     long it is; one that does not fit reads nothing until bytes are given back (its client's
//     TCP window fills and its sends wait), and gets 503 with Retry-After if it waited past
//     `budget_wait` or its own deadline. A quarter of the budget is kept for small requests, so
//     a flood of big bodies leaves /health and usual requests served. A request's buffer is freed
//     once the request is at the server.
// A whole request goes to the server on a connection of its own ("Connection: close"; the
// client's address in the X-Smol-Client field) and the reply comes back through the gate, which
// writes it to the client as it arrives (token by token for a stream), holding at most
// `reply_buffer_bytes` per connection: past that it stops reading the server's side, whose
// writes then wait. The reply's end is found from its framing, so the client connection stays
// open for its next request, which goes through the same checks. A client that hangs up
// (or shuts down its sending side) mid-reply has its server connection closed (or shut down the
// same way), which is how the server notices and cancels the generation, as it did with the
// client connected directly.
//
// main.cpp starts it on a thread of its own (run()) and ends it with begin_shutdown() and
// finish(); the parsing it relies on is http_framing.hpp, unit-tested.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "gate_budget.hpp"
#include "http_framing.hpp"

namespace smol_server {

using GateClock = std::chrono::steady_clock;

struct GateOptions {
    int max_connections = 2048;
    std::chrono::milliseconds header_timeout{10'000};
    std::chrono::milliseconds body_timeout{60'000};
    std::chrono::milliseconds keep_alive_timeout{5'000};  // 0: close after each reply
    std::chrono::milliseconds send_timeout{30'000};       // a reply that no byte of goes out for this long is dropped
    std::size_t max_header_bytes = 16 << 10;
    std::uint64_t max_body_bytes = 4u << 20;
    std::size_t reply_buffer_bytes = 256 << 10;
    int max_requests_per_connection = 100;
    // All request bytes the gate holds at once (headers and bodies arriving, requests on their
    // way to the server): 256 MiB, against 2048 connections x (16 KiB + 4 MiB), about 8 GiB,
    // that the per-connection limits alone allow.
    std::size_t max_buffered_bytes = std::size_t(256) << 20;
    // How long a request waits for room in that budget before it gets 503 (its header or body
    // deadline applies too, whichever comes first).
    std::chrono::milliseconds budget_wait{10'000};
};

// Counters for /metrics, written by the gate's thread and read from any.
struct GateStats {
    std::atomic<std::uint64_t> open{0};            // client connections open now
    std::atomic<std::uint64_t> accepted{0};        // client connections taken
    std::atomic<std::uint64_t> refused{0};         // turned away at max_connections
    std::atomic<std::uint64_t> timed_out{0};       // closed because a header or body was not whole in time
    std::atomic<std::uint64_t> idle_closed{0};     // kept-alive connections closed after keep_alive_timeout
    std::atomic<std::uint64_t> buffered{0};        // bytes of the request budget taken now (held or reserved)
    std::atomic<std::uint64_t> buffer_budget{0};   // max_buffered_bytes
    std::atomic<std::uint64_t> budget_waits{0};    // times a request had to wait for room in the budget
    std::atomic<std::uint64_t> budget_refused{0};  // requests refused for it (503 after waiting, 413 if never fits)
};

// What the gate needs from its owner; called on the gate's thread.
struct GateHooks {
    // The JSON body of an error the gate answers itself; `target` is the request's target, or ""
    // when the header never arrived whole.
    std::function<std::string(const http::Refusal&, std::string_view target)> error_body;
    // Header lines (each ending in CRLF) that let a page from `origin` read an error the gate
    // answers, or "" where it may not; called only for requests whose header arrived whole.
    std::function<std::string(std::string_view origin)> cors_fields;
    // A request the gate answered itself rather than forwarding ("-" for what it never learnt).
    std::function<void(const std::string& client, const std::string& method, const std::string& target,
                       const http::Refusal&)>
        answered;
    // Header lines (each ending in CRLF) on every reply the gate answers itself, as the server
    // behind puts them on its own (X-Smol-Replica: a balancer's operator sees who refused).
    std::string reply_fields;
};

// The header lines of a refusal the gate answers itself: the hooks' fields, and on a 503 (a
// condition that passes) Retry-After, which clients and balancers wait by.
inline std::string gate_refusal_fields(const GateHooks& hooks, const http::Refusal& refusal) {
    return hooks.reply_fields + (refusal.status == 503 ? "Retry-After: 1\r\n" : "");
}

// The header field that tells the server behind the gate who the client is (any copy the client
// sends is dropped).
inline constexpr const char* kClientField = "X-Smol-Client";

// A listening TCP socket on host:port (port 0: any free one; `bound_port` says which), ready
// for the gate; -1 with `error` set when it cannot be had.
inline int open_listener(const std::string& host, int port, int& bound_port, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
        error = std::string("cannot resolve the address: ") + ::gai_strerror(rc);
        return -1;
    }
    int fd = -1;
    error = "no address to listen on";
    for (addrinfo* a = found; a; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int yes = 1, no = 0;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (a->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
        error = std::strerror(errno);
        ::close(fd);
        fd = -1;
    }
    ::freeaddrinfo(found);
    if (fd < 0) return -1;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    return fd;
}

class ConnectionGate {
public:
    // Takes `listen_fd` (from open_listener) and forwards to the Unix socket at `upstream_path`.
    ConnectionGate(int listen_fd, const std::string& upstream_path, GateOptions options, GateHooks hooks)
        : options_(options), hooks_(std::move(hooks)), budget_(options.max_buffered_bytes), listen_fd_(listen_fd) {
        stats_.buffer_budget.store(options.max_buffered_bytes);
        if (upstream_path.size() >= sizeof(upstream_.sun_path))
            throw std::runtime_error("the server's socket path is too long: " + upstream_path);
        upstream_.sun_family = AF_UNIX;
        std::memcpy(upstream_.sun_path, upstream_path.c_str(), upstream_path.size() + 1);
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (epoll_ < 0 || wake_ < 0) throw std::runtime_error(std::string("epoll: ") + std::strerror(errno));
        add(wake_, key(0, Kind::wake), EPOLLIN);
        add(listen_fd_, key(0, Kind::listener), EPOLLIN);
    }
    ConnectionGate(const ConnectionGate&) = delete;
    ConnectionGate& operator=(const ConnectionGate&) = delete;
    ~ConnectionGate() {
        for (auto& [id, c] : conns_) {
            if (c->up >= 0) ::close(c->up);
            ::close(c->fd);
        }
        if (listen_fd_ >= 0) ::close(listen_fd_);
        ::close(wake_);
        ::close(epoll_);
    }

    const GateStats& stats() const { return stats_; }

    // The event loop; returns once finish() has run its course.
    void run() {
        std::vector<epoll_event> events(256);
        while (true) {
            const auto now = GateClock::now();
            const auto wait = std::clamp<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(next_check_ - now).count() + 1, 0, 1000);
            const int n = ::epoll_wait(epoll_, events.data(), int(events.size()), int(wait));
            if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
            for (int i = 0; i < n; ++i) {
                const std::uint64_t k = events[std::size_t(i)].data.u64;
                const std::uint32_t ev = events[std::size_t(i)].events;
                const Kind kind = Kind(k & 3);
                if (kind == Kind::wake) {
                    std::uint64_t ignored;
                    (void)!::read(wake_, &ignored, sizeof ignored);
                    continue;
                }
                if (kind == Kind::listener) {
                    accept_all();
                    continue;
                }
                const auto it = conns_.find(k >> 2);
                if (it == conns_.end()) continue;  // closed earlier in this batch
                Conn& c = *it->second;
                if (kind == Kind::client) on_client(c, ev);
                else on_upstream(c, ev);
            }
            if (!draining_seen_ && draining_.load()) {
                draining_seen_ = true;
                close_where([](const Conn& c) { return c.phase == Phase::header && c.in.empty() && c.requests > 0; });
            }
            if (!finishing_seen_ && finishing_.load()) {
                finishing_seen_ = true;
                if (listen_fd_ >= 0) {
                    ::close(listen_fd_);
                    listen_fd_ = -1;
                }
                close_where([](const Conn& c) { return c.phase != Phase::upstream; });
                next_check_ = std::min(next_check_, finish_deadline_.load());
            }
            if (GateClock::now() >= next_check_) check_deadlines();
            admit_waiters();
            if (finishing_seen_) {
                const bool past = GateClock::now() >= finish_deadline_.load();
                if (conns_.empty() || past) {
                    close_where([](const Conn&) { return true; });
                    std::lock_guard lock(done_mutex_);
                    done_ = true;
                    drained_ = !past;
                    done_cv_.notify_all();
                    return;
                }
            }
        }
    }

    // Shutdown, first step (any thread): replies from now on close their connection, and
    // connections waiting for a next request are closed.
    void begin_shutdown() {
        draining_.store(true);
        wake();
    }

    // Shutdown, last step (any thread): stops accepting, closes every connection without a
    // request at the server, lets the replies under way reach their clients until `deadline`,
    // then ends run(). Whether every reply got through in time.
    bool finish(GateClock::time_point deadline) {
        draining_.store(true);
        finish_deadline_.store(deadline);
        finishing_.store(true);
        wake();
        std::unique_lock lock(done_mutex_);
        done_cv_.wait_until(lock, deadline + std::chrono::milliseconds(500), [&] { return done_; });
        return done_ && drained_;
    }

private:
    enum class Kind : std::uint64_t { client = 0, upstream = 1, listener = 2, wake = 3 };
    static std::uint64_t key(std::uint64_t id, Kind kind) { return id << 2 | std::uint64_t(kind); }

    enum class Phase {
        header,    // reading a request header (or waiting for one on a kept-alive connection)
        body,      // reading its body
        upstream,  // forwarded: relaying the reply
        closing,   // writing a refusal, then reading and dropping what the client still sends
                   // for a moment, so that closing does not reset the connection under the refusal
    };

    struct Conn {
        std::uint64_t id = 0;
        int fd = -1;
        std::string client;  // the peer's IP address
        Phase phase = Phase::header;
        GateClock::time_point deadline = GateClock::time_point::max();
        bool client_eof = false;  // the client shut down its sending side
        int requests = 0;         // forwarded on this connection
        std::uint32_t events = 0;

        // The request being read, then whatever the client pipelined after it; it never holds more
        // than `grant` bytes, this connection's share of the budget (its buffer is that size).
        std::string in;
        std::size_t grant = 0;
        bool waiting = false;         // for room in the budget, reading nothing meanwhile
        bool peer_shut_seen = false;  // the client's hang-up, seen while waiting (not looked for again)
        std::size_t want = 0;         // the share it waits for
        GateClock::time_point phase_deadline;  // the header or body deadline, while it waits
        std::size_t searched = 0;  // of `in`, for the header's end
        http::RequestHead head;
        http::BodyScanner body;
        std::size_t body_scanned = 0;  // bytes after the header fed to `body`

        // At the server.
        int up = -1;
        std::uint32_t up_events = 0;
        bool up_registered = false;
        std::string to_up;  // the forwarded header, until sent
        std::string fwd;    // then the body: fwd[fwd_from, fwd_end), the buffer `in` was (the
                            // bytes after it, pipelined, go back to `in` once it is sent)
        std::size_t fwd_from = 0, fwd_end = 0;
        std::size_t up_sent = 0;  // of to_up then the body
        GateClock::time_point connect_until;
        std::string reply_head;  // the reply's header until it is whole
        bool reply_started = false;
        bool reply_done = false;  // its last byte arrived (the server then closes its side)
        GateClock::time_point reply_done_at;
        http::BodyScanner reply_body;
        bool keep_alive = false;  // after this reply

        // To the client.
        std::string out;
        std::size_t out_sent = 0;
        GateClock::time_point last_progress;

        std::size_t pending() const { return out.size() - out_sent; }
        bool up_unsent() const { return up_sent < to_up.size() + (fwd_end - fwd_from); }
    };

    // ---- epoll plumbing ----

    void add(int fd, std::uint64_t k, std::uint32_t events) {
        epoll_event e{};
        e.events = events;
        e.data.u64 = k;
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e);
    }
    void wake() {
        const std::uint64_t one = 1;
        (void)!::write(wake_, &one, sizeof one);
    }

    // Sets what epoll reports for `c`'s sockets from its state.
    void watch(Conn& c) {
        std::uint32_t want = 0;
        switch (c.phase) {
        case Phase::header:
        case Phase::body:
            // A connection waiting for room is not read; only its hang-up is looked for, once.
            want = !c.waiting ? std::uint32_t(EPOLLIN | EPOLLRDHUP) : c.peer_shut_seen ? 0u : std::uint32_t(EPOLLRDHUP);
            break;
        case Phase::upstream: want = (c.client_eof ? 0u : std::uint32_t(EPOLLRDHUP)) | (c.pending() ? EPOLLOUT : 0u); break;
        case Phase::closing:
            want = (c.client_eof ? 0u : std::uint32_t(EPOLLIN | EPOLLRDHUP)) | (c.pending() ? EPOLLOUT : 0u);
            break;
        }
        if (want != c.events) {
            epoll_event e{};
            e.events = want;
            e.data.u64 = key(c.id, Kind::client);
            ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &e);
            c.events = want;
        }
        if (c.up < 0) return;
        // Reading the server's side pauses while the client has a full buffer to take; the
        // socket leaves epoll meanwhile, or its hang-up (once the server wrote everything and
        // closed) would be reported again and again.
        std::uint32_t up_want = 0;
        if (c.up_unsent()) up_want = EPOLLOUT;
        else if (c.reply_done || c.pending() < options_.reply_buffer_bytes) up_want = EPOLLIN | EPOLLRDHUP;
        if (up_want == 0) {
            if (c.up_registered) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.up, nullptr);
            c.up_registered = false;
            c.up_events = 0;
            return;
        }
        epoll_event e{};
        e.events = up_want;
        e.data.u64 = key(c.id, Kind::upstream);
        if (!c.up_registered) ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.up, &e);
        else if (up_want != c.up_events) ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.up, &e);
        c.up_registered = true;
        c.up_events = up_want;
    }

    // Adds bytes for the client; the send timeout counts from when output starts waiting.
    static void queue(Conn& c, std::string_view bytes) {
        if (c.pending() == 0) c.last_progress = GateClock::now();
        c.out.append(bytes);
    }

    void set_deadline(Conn& c, GateClock::time_point t) {
        c.deadline = t;
        next_check_ = std::min(next_check_, t);
    }

    void close_upstream(Conn& c) {
        if (c.up < 0) return;
        ::close(c.up);  // also leaves epoll
        c.up = -1;
        c.up_registered = false;
        c.up_events = 0;
    }

    // Closes a client connection (and its server connection, which cancels a generation).
    void drop(Conn& c) {
        leave_budget(c);
        close_upstream(c);
        ::close(c.fd);
        stats_.open--;
        const std::uint64_t id = c.id;
        conns_.erase(id);  // `c` is gone from here on
    }

    template <class Pred>
    void close_where(Pred pred) {
        std::vector<std::uint64_t> ids;
        for (const auto& [id, c] : conns_)
            if (pred(*c)) ids.push_back(id);
        for (std::uint64_t id : ids) drop(*conns_.at(id));
    }

    // ---- the budget for request bytes (gate_budget.hpp) ----

    // A connection's first share, for a header: most requests (header and body) fit in it.
    static constexpr std::size_t kFirstShare = 4 << 10;

    // `s` with the same bytes in a buffer of exactly `capacity` bytes (appending or reserve()
    // would round the capacity up, past the share it was taken for).
    static void set_capacity(std::string& s, std::size_t capacity) {
        std::string fresh;
        fresh.reserve(std::max(capacity, s.size()));
        fresh.append(s);
        s.swap(fresh);
    }
    static void free_buffer(std::string& s) { std::string().swap(s); }

    void publish_budget() { stats_.buffered.store(budget_.used()); }

    // Sets `c`'s share to what it holds now, giving back (or, for the few bytes of a forwarded
    // header, taking without asking) the difference.
    void set_grant(Conn& c, std::size_t bytes) {
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
    bool make_room(Conn& c) {
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
    void admit_waiters() {
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
    void finish_forwarded(Conn& c) {
        if (c.fwd.empty() && c.to_up.empty()) return;
        if (c.fwd_end < c.fwd.size()) c.in.insert(0, c.fwd, c.fwd_end, std::string::npos);
        free_buffer(c.fwd);
        free_buffer(c.to_up);
        c.fwd_from = c.fwd_end = c.up_sent = 0;
        set_grant(c, c.in.size());
    }

    // Gives back all `c` holds of the budget and frees its request buffers (it is refused or gone).
    void leave_budget(Conn& c) {
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

    // ---- accepting ----

    void accept_all() {
        for (int i = 0; i < 256 && listen_fd_ >= 0; ++i) {
            sockaddr_storage addr{};
            socklen_t len = sizeof addr;
            const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    // Out of descriptors: stop looking at the listener for a moment (it would
                    // be reported ready again at once) rather than spin.
                    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_fd_, nullptr);
                    accept_paused_until_ = GateClock::now() + std::chrono::milliseconds(100);
                    next_check_ = std::min(next_check_, accept_paused_until_);
                }
                return;
            }
            const std::string client = address_of(addr);
            if (conns_.size() >= std::size_t(options_.max_connections)) {
                // Over the cap: a 503 if the socket takes it at once, and closed.
                stats_.refused++;
                const http::Refusal r{503, "too_many_connections",
                                      "the server has too many connections open; retry in a moment"};
                const std::string reply = http::gate_response(503, "application/json", hooks_.error_body(r, ""),
                                                              gate_refusal_fields(hooks_, r));
                (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
                // A request already here is read first, so closing sends an end rather than a
                // reset that could overtake the 503.
                char scratch[16384];
                (void)!::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
                ::close(fd);
                hooks_.answered(client, "-", "-", r);
                continue;
            }
            const int yes = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // stream chunks go out as written
            auto conn = std::make_unique<Conn>();
            Conn& c = *conn;
            c.id = next_id_++;
            c.fd = fd;
            c.client = client;
            conns_.emplace(c.id, std::move(conn));
            stats_.accepted++;
            stats_.open++;
            add(fd, key(c.id, Kind::client), EPOLLIN | EPOLLRDHUP);
            c.events = EPOLLIN | EPOLLRDHUP;
            set_deadline(c, GateClock::now() + options_.header_timeout);
        }
    }

    static std::string address_of(const sockaddr_storage& addr) {
        char text[INET6_ADDRSTRLEN] = "?";
        if (addr.ss_family == AF_INET)
            ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
        else if (addr.ss_family == AF_INET6)
            ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
        return text;
    }

    // ---- the client's side ----

    void on_client(Conn& c, std::uint32_t ev) {
        if (ev & EPOLLERR) return drop(c);  // reset
        if ((ev & EPOLLOUT) && !flush(c)) return;
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) on_client_readable(c, ev);
    }

    void on_client_readable(Conn& c, std::uint32_t ev) {
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
        if ((ev & EPOLLIN) && c.in.empty() && c.phase == Phase::header && c.requests > 0)
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
    void advance(Conn& c) {
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
    void refuse(Conn& c, const http::Refusal& r) {
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
    bool flush(Conn& c) {
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

    // ---- the server's side ----

    void forward(Conn& c, std::size_t end) {
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

    void connect_upstream(Conn& c) {
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

    void on_upstream(Conn& c, std::uint32_t ev) {
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
    GateClock::time_point upstream_deadline(const Conn& c) const {
        GateClock::time_point t = GateClock::time_point::max();
        if (c.pending() > 0) t = c.last_progress + options_.send_timeout;
        if (c.reply_done && c.up >= 0) t = std::min(t, c.reply_done_at + std::chrono::seconds(1));
        return t;
    }

    // Takes bytes of the reply; false once the connection is gone.
    bool relay(Conn& c, std::string_view bytes) {
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
    void upstream_ended(Conn& c) {
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
    bool next_request(Conn& c) {
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

    // ---- deadlines ----

    void check_deadlines() {
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

    static std::string seconds(std::chrono::milliseconds d) {
        const long long ms = d.count();
        return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
    }

    GateOptions options_;
    GateHooks hooks_;
    GateStats stats_;
    BufferBudget budget_;
    bool budget_freed_ = false;  // bytes were given back since the waiters last had a look
    sockaddr_un upstream_{};
    int listen_fd_ = -1;
    int epoll_ = -1;
    int wake_ = -1;
    std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
    std::uint64_t next_id_ = 1;
    GateClock::time_point next_check_ = GateClock::time_point::max();
    GateClock::time_point accept_paused_until_{};

    std::atomic<bool> draining_{false};
    std::atomic<bool> finishing_{false};
    std::atomic<GateClock::time_point> finish_deadline_{GateClock::time_point::max()};
    bool draining_seen_ = false;
    bool finishing_seen_ = false;
    std::mutex done_mutex_;
    std::condition_variable done_cv_;
    bool done_ = false;
    bool drained_ = false;
};

}  // namespace smol_server
