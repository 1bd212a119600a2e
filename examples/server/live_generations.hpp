#pragma once
// The generations whose replies are still being written (LiveGenerations below), for shutdown.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

#include "smol/smol.hpp"

namespace smol_server {

// The generations whose responses are still being written. Shutdown cancels them all and waits
// for their last bytes, so clients see a proper end (an error event or body) rather than a cut
// connection; a request that arrives once shutdown has begun is cancelled as soon as it is listed.
class LiveGenerations {
public:
    // Keeps a stream listed for as long as it lives (it goes with the response's provider).
    class Listing {
    public:
        Listing(LiveGenerations& owner, std::list<std::shared_ptr<smol::GenerationStream>>::iterator at)
            : owner_(owner), at_(at) {}
        Listing(const Listing&) = delete;
        Listing& operator=(const Listing&) = delete;
        ~Listing() {
            std::lock_guard lock(owner_.mutex_);
            owner_.streams_.erase(at_);
            if (owner_.streams_.empty()) owner_.emptied_.notify_all();
        }

    private:
        LiveGenerations& owner_;
        std::list<std::shared_ptr<smol::GenerationStream>>::iterator at_;
    };

    std::unique_ptr<Listing> add(std::shared_ptr<smol::GenerationStream> stream) {
        std::lock_guard lock(mutex_);
        if (closing_) stream->cancel();
        return std::make_unique<Listing>(*this, streams_.insert(streams_.end(), std::move(stream)));
    }

    bool closing() const {
        std::lock_guard lock(mutex_);
        return closing_;
    }

    // Starts shutdown: cancels every listed generation still running; returns how many.
    std::size_t close_and_cancel() {
        std::lock_guard lock(mutex_);
        closing_ = true;
        std::size_t n = 0;
        for (const auto& s : streams_) {
            if (s->finished()) continue;
            s->cancel();
            ++n;
        }
        return n;
    }

    // Responses still being written (their generation running, or its last bytes going out).
    std::size_t listed() const {
        std::lock_guard lock(mutex_);
        return streams_.size();
    }

    // Whether every listed response was written before `deadline`.
    bool wait_until_empty(std::chrono::steady_clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        return emptied_.wait_until(lock, deadline, [&] { return streams_.empty(); });
    }

private:
    mutable std::mutex mutex_;
    std::condition_variable emptied_;
    std::list<std::shared_ptr<smol::GenerationStream>> streams_;
    bool closing_ = false;
};

}  // namespace smol_server
