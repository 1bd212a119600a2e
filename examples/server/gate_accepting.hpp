#pragma once
// The connection gate's accepting part: the listening socket it is given (open_listener),
// taking new client connections from it, with a 503 past `max_connections`, and at shutdown
// the end of both: the last connections taken and every request not yet at the server
// answered, never dropped unanswered.
//
// Part of ConnectionGate: connection_gate.hpp declares the class and includes this file at its end.

#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include "connection_gate.hpp"

namespace smol_server {

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

// Takes up to 256 waiting connections; whether the listener's queue was found empty.
inline bool ConnectionGate::accept_all() {
    for (int i = 0; i < 256 && listen_fd_ >= 0; ++i) {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                // Out of descriptors: stop looking at the listener for a moment (it would
                // be reported ready again at once) rather than spin.
                ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_fd_, nullptr);
                accept_paused_until_ = GateClock::now() + std::chrono::milliseconds(100);
                next_check_ = std::min(next_check_, accept_paused_until_);
            }
            return err == EAGAIN || err == EWOULDBLOCK;
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
    return listen_fd_ < 0;
}

// Shutdown: closing the listener resets the connections the kernel has completed but not handed
// over yet, under requests their clients (a balancer) may already have sent, and a balancer does
// not retry a request that got no reply. So the queue is emptied first (those connections are
// answered like the rest, refuse_unforwarded); a client connecting after the close is refused at
// connect, which clients and balancers retry elsewhere.
inline void ConnectionGate::stop_accepting() {
    // The queue holds at most SOMAXCONN; the bound only keeps a connect flood from holding the loop.
    for (int rounds = 0; rounds < 64 && !accept_all(); ++rounds) {}
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
}

// Shutdown: every connection whose request has not reached the server gets a 503 (with
// Retry-After, so a balancer sends it to another replica), also one whose request has not arrived
// yet; only a kept-alive connection between requests is closed, as at the drain's start.
inline void ConnectionGate::refuse_unforwarded() {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, c] : conns_)
        if (c->phase == Phase::header || c->phase == Phase::body) ids.push_back(id);
    for (std::uint64_t id : ids) {
        Conn& c = *conns_.at(id);  // refuse() drops only the connection it answers
        if (c.between_requests()) drop(c);
        else refuse(c, {503, "server_shutting_down", "the server is shutting down; retry in a moment"});
    }
}

inline std::string ConnectionGate::address_of(const sockaddr_storage& addr) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (addr.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
    else if (addr.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
    return text;
}

}  // namespace smol_server
