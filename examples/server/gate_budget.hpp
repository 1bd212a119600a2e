#pragma once
// The connection gate's server-wide budget for request bytes it holds (headers and bodies being
// received, requests waiting to be forwarded): the pure accounting, without sockets, so that it
// is unit-tested (tests/test_http_framing.cpp) and connection_gate.hpp only asks it.
//
// A connection takes bytes of the budget before it reads them: a few KiB for a header, and as
// soon as the header says how long the body is, the whole request at once, so that every
// request let in can be read to its end (none holds half a body while waiting for room another
// half-read one holds). One that does not fit waits, reading nothing (the client's TCP window
// then applies back-pressure), until bytes are given back; its deadline still runs.
//
// Small requests (up to `small_request` bytes in all: every header, a health check, a usual
// chat request) may use the whole budget; bigger ones only three quarters of it, so a flood of
// large bodies leaves room for the rest. Big requests are let in in the order they came (a big
// one that does not fit holds back the big ones after it, so none is passed over for ever);
// small ones never wait behind big ones.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace smol_server {

class BufferBudget {
public:
    explicit BufferBudget(std::size_t limit, std::size_t small_request = 64 << 10)
        : limit_(limit), small_(small_request) {}

    std::size_t limit() const { return limit_; }
    std::size_t used() const { return used_; }
    std::size_t waiting() const { return waiters_.size(); }

    // Whether a request of `total` bytes counts as big.
    bool big(std::size_t total) const { return total > small_; }
    // How much of the budget may be in use once a request of `total` bytes has its share: all
    // of it for a small request, all but the quarter kept for small ones for a big one.
    std::size_t cap_for(std::size_t total) const { return big(total) ? limit_ - limit_ / 4 : limit_; }
    // Whether a request of `total` bytes fits even an empty budget (if not, it never will).
    bool could_fit(std::size_t total) const { return total <= cap_for(total); }

    // Takes `more` bytes for a request of `total` bytes if they fit now without passing over a
    // big request that waits; false (nothing taken) otherwise.
    bool try_take(std::size_t more, std::size_t total) {
        if (big(total) && big_waiting_ > 0) return false;
        if (more > cap_for(total) || used_ > cap_for(total) - more) return false;
        used_ += more;
        return true;
    }
    // Takes bytes whether or not they fit (a few, which the gate cannot avoid holding).
    void take(std::size_t n) { used_ += n; }
    void give(std::size_t n) { used_ -= std::min(n, used_); }

    // Queues `id` for `more` bytes of a request of `total` bytes (after try_take said no).
    void wait(std::uint64_t id, std::size_t more, std::size_t total) {
        waiters_.push_back({id, more, total});
        big_waiting_ += big(total);
    }
    // Takes `id` out of the queue (it was closed or gave up); nothing if it is not there.
    void forget(std::uint64_t id) {
        const auto it = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.id == id; });
        if (it == waiters_.end()) return;
        big_waiting_ -= big(it->total);
        waiters_.erase(it);
    }
    struct Admitted {
        std::uint64_t id;
        std::size_t more;  // the bytes taken for it
    };
    // Takes their bytes for the waiters that fit now, in the order they came, and returns them:
    // a big one that does not fit holds back the big ones after it, not the small ones.
    std::vector<Admitted> admit() {
        std::vector<Admitted> admitted;
        bool big_blocked = false;
        for (auto it = waiters_.begin(); it != waiters_.end();) {
            const bool is_big = big(it->total);
            const std::size_t cap = cap_for(it->total);
            if ((is_big && big_blocked) || it->more > cap || used_ > cap - it->more) {
                big_blocked = big_blocked || is_big;
                ++it;
                continue;
            }
            used_ += it->more;
            big_waiting_ -= is_big;
            admitted.push_back({it->id, it->more});
            it = waiters_.erase(it);
        }
        return admitted;
    }

private:
    struct Waiter {
        std::uint64_t id;
        std::size_t more;
        std::size_t total;
    };
    std::size_t limit_;
    std::size_t small_;
    std::size_t used_ = 0;
    std::deque<Waiter> waiters_;
    std::size_t big_waiting_ = 0;
};

}  // namespace smol_server
