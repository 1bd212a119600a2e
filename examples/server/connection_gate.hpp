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
//
// This file holds the class, its connection state, the event loop and its epoll plumbing; each
// part of the work is in a file of its own, included at the end: gate_accepting.hpp (new
// connections), gate_request_reading.hpp (a request read by its framing, refusals),
// gate_budget_shares.hpp (each connection's share of the request budget), gate_forwarding.hpp
// (the request to the server, its reply back) and gate_deadlines.hpp (timeouts).

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
                close_where([](const Conn& c) { return c.between_requests(); });
            }
            if (!finishing_seen_ && finishing_.load()) {
                finishing_seen_ = true;
                stop_accepting();
                refuse_unforwarded();
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

    // Shutdown, last step (any thread): stops accepting, answers 503 to every request not yet at
    // the server, lets the replies under way reach their clients until `deadline`, then ends
    // run(). Whether every reply got through in time.
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
        // Kept alive after a reply, with nothing of its next request read yet.
        bool between_requests() const { return phase == Phase::header && in.empty() && requests > 0; }
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

    // ---- accepting: new connections, a 503 past max_connections, the end at shutdown (gate_accepting.hpp) ----
    bool accept_all();
    void stop_accepting();
    void refuse_unforwarded();
    static std::string address_of(const sockaddr_storage& addr);

    // ---- the client's side: a request read by its framing, refusals, writes (gate_request_reading.hpp) ----
    void on_client(Conn& c, std::uint32_t ev);
    void on_client_readable(Conn& c, std::uint32_t ev);
    void advance(Conn& c);
    void refuse(Conn& c, const http::Refusal& r);
    bool flush(Conn& c);

    // ---- each connection's share of the request budget (gate_budget_shares.hpp; accounting: gate_budget.hpp) ----
    // A connection's first share, for a header: most requests (header and body) fit in it.
    static constexpr std::size_t kFirstShare = 4 << 10;
    static void set_capacity(std::string& s, std::size_t capacity);
    static void free_buffer(std::string& s);
    void publish_budget();
    void set_grant(Conn& c, std::size_t bytes);
    bool make_room(Conn& c);
    void admit_waiters();
    void finish_forwarded(Conn& c);
    void leave_budget(Conn& c);

    // ---- the server's side: a whole request forwarded, its reply relayed back (gate_forwarding.hpp) ----
    void forward(Conn& c, std::size_t end);
    void connect_upstream(Conn& c);
    void on_upstream(Conn& c, std::uint32_t ev);
    GateClock::time_point upstream_deadline(const Conn& c) const;
    bool relay(Conn& c, std::string_view bytes);
    void upstream_ended(Conn& c);
    bool next_request(Conn& c);

    // ---- deadlines: header, body, idle, send and connect timeouts (gate_deadlines.hpp) ----
    void check_deadlines();
    static std::string seconds(std::chrono::milliseconds d);

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

// The parts, after the class they define members of.
#include "gate_accepting.hpp"
#include "gate_request_reading.hpp"
#include "gate_budget_shares.hpp"
#include "gate_forwarding.hpp"
#include "gate_deadlines.hpp"
