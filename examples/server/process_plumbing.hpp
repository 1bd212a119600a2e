#pragma once
// What smol-server asks of the process and the OS, apart from HTTP: the shutdown signals (which
// only wake the main thread), the internal Unix socket cpp-httplib listens on behind the gate
// (reached through /proc/self/fd once its name is gone), and the open-file limit that
// --max-connections needs.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "server_options.hpp"

namespace smol_server {

// ---- shutdown signals ------------------------------------------------------------------------

// The main thread sleeps on this pipe; a byte on it says why to wake up. Signal handlers may
// only do async-signal-safe work, so the handler writes one byte and everything else happens
// on the main thread.
inline int wake_pipe[2] = {-1, -1};
inline constexpr char kWakeSignal = 's';       // SIGINT or SIGTERM
inline constexpr char kWakeLoaded = 'l';       // the loader thread finished (either way)
inline constexpr char kWakeListenerEnd = 'x';  // the HTTP listener returned
inline volatile std::sig_atomic_t received_signal = 0;

inline void wake_main(char why) {
    const int saved = errno;
    (void)!::write(wake_pipe[1], &why, 1);  // non-blocking: a full pipe already wakes the reader
    errno = saved;
}

extern "C" inline void on_shutdown_signal(int sig) {
    received_signal = sig;
    wake_main(kWakeSignal);
}

// SA_RESETHAND: a second Ctrl-C kills the process the default way, should shutdown itself hang.
// A drain (main.cpp) arms them once more, so that a second signal cuts the drain short and a
// third kills.
inline bool arm_shutdown_handlers() {
    struct sigaction action {};
    action.sa_handler = on_shutdown_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    return ::sigaction(SIGINT, &action, nullptr) == 0 && ::sigaction(SIGTERM, &action, nullptr) == 0;
}

inline bool install_shutdown_handlers() {
    if (::pipe2(wake_pipe, O_CLOEXEC) != 0) return false;
    ::fcntl(wake_pipe[1], F_SETFL, ::fcntl(wake_pipe[1], F_GETFL) | O_NONBLOCK);
    return arm_shutdown_handlers();
}

inline char wait_for_wake() {
    char why = 0;
    while (true) {
        const ssize_t n = ::read(wake_pipe[0], &why, 1);
        if (n == 1) return why;
        if (n < 0 && errno != EINTR) return kWakeSignal;  // cannot wait any more: shut down
    }
}

// The same, giving up after `ms` milliseconds: then kNoWake.
inline constexpr char kNoWake = 0;
inline char wait_for_wake(int ms) {
    pollfd pipe_end{wake_pipe[0], POLLIN, 0};
    const int ready = ::poll(&pipe_end, 1, ms);
    if (ready == 0 || (ready < 0 && errno == EINTR)) return kNoWake;
    return wait_for_wake();  // readable, or poll failed and read() says so
}

// ---- the internal socket ---------------------------------------------------------------------

// The Unix socket httplib listens on behind the gate, bound in a directory of its own that only
// this user may enter (so nobody else can reach httplib around the gate, or claim to be a client
// through its X-Smol-Client field). Once bound, detach() keeps a handle on the socket and
// removes its name and directory at once, so nothing is left behind however the process ends
// (a second signal, a crash); the gate then connects through /proc/self/fd/N, which only this
// process can use. Without /proc the name stays and goes on the way out.
class InternalSocket {
public:
    InternalSocket() {
        const char* tmp = std::getenv("TMPDIR");
        std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/smol-server-XXXXXX";
        if (!::mkdtemp(dir.data())) {
            dir = "/tmp/smol-server-XXXXXX";
            if (!::mkdtemp(dir.data())) return;
        }
        dir_ = dir;
        path_ = dir_ + "/http.sock";
    }
    InternalSocket(const InternalSocket&) = delete;
    InternalSocket& operator=(const InternalSocket&) = delete;
    ~InternalSocket() { remove(); }

    bool ok() const { return !path_.empty() && path_.size() < sizeof(sockaddr_un::sun_path); }
    const std::string& path() const { return path_; }  // to bind
    const std::string& dir() const { return dir_; }
    // Where the gate connects.
    const std::string& connect_path() const { return handle_path_.empty() ? path_ : handle_path_; }

    void detach() {
        const int handle = ::open(path_.c_str(), O_PATH | O_CLOEXEC);
        if (handle < 0) return;
        const std::string via = "/proc/self/fd/" + std::to_string(handle);
        // A trial connection, which httplib accepts and closes once it runs.
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, via.c_str(), via.size() + 1);
        const int trial = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool works = trial >= 0 && ::connect(trial, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
        if (trial >= 0) ::close(trial);
        if (!works) {
            ::close(handle);
            return;
        }
        remove();
        handle_path_ = via;  // the handle stays open for the life of the process
    }

    void remove() {
        if (path_.empty()) return;
        ::unlink(path_.c_str());
        ::rmdir(dir_.c_str());
        path_.clear();
    }

private:
    std::string dir_;
    std::string path_;
    std::string handle_path_;
};

// ---- the open-file limit ---------------------------------------------------------------------

// Raises the open-file limit to the most allowed: every connection is a descriptor, and 1,000
// clients are past the usual soft limit of 1024. Lowers --max-connections (saying so) when even
// that is not enough for them beside httplib's `pool` threads' connections (two descriptors
// each: the gate's end and httplib's) and a few files of the server's own.
inline void raise_open_file_limit(ServerOptions& o, int pool) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) != 0 && limit.rlim_max == RLIM_INFINITY) {
            raised.rlim_cur = 1 << 20;  // "unlimited" may still be refused past the kernel's nr_open
            ::setrlimit(RLIMIT_NOFILE, &raised);
        }
        ::getrlimit(RLIMIT_NOFILE, &limit);
    }
    const rlim_t reserved = 2 * rlim_t(pool) + 64;
    const rlim_t wanted = rlim_t(o.max_connections) + reserved;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) return;
    const int allowed = limit.rlim_cur > reserved + 16 ? int(limit.rlim_cur - reserved) : 16;
    std::fprintf(stderr,
                 "smol-server: the open-file limit is %llu (hard limit %llu), too low for %d connections; serving at "
                 "most %d (raise it with 'ulimit -Hn' or LimitNOFILE=)\n",
                 (unsigned long long)limit.rlim_cur, (unsigned long long)limit.rlim_max, o.max_connections, allowed);
    o.max_connections = allowed;
}

}  // namespace smol_server
