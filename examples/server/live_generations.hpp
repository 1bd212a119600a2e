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
//
// A drain (SIGTERM) waits for the requests under way, and a request is under way from its
// admission, before anything else is done for it, not only once its generation is listed: the
// draining check and the count the drain waits on are one step under one lock, so a request
// that arrives as the drain begins either is refused before any byte or is served in full.
class LiveGenerations {
public:
    // One admitted request, counted as under way for as long as it lives: from the admission
    // through the parsing and queueing to the last byte of its reply (it moves into the Listing).
    class Admission {
    public:
        explicit Admission(LiveGenerations& owner) : owner_(owner) {}
        Admission(const Admission&) = delete;
        Admission& operator=(const Admission&) = delete;
        ~Admission() {
            std::lock_guard lock(owner_.mutex_);
            if (--owner_.under_way_ == 0) owner_.emptied_.notify_all();
        }

    private:
        LiveGenerations& owner_;
    };

    // Keeps a stream listed for as long as it lives (it goes with the response's provider).
    class Listing {
    public:
        Listing(LiveGenerations& owner, std::list<std::shared_ptr<smol::GenerationStream>>::iterator at,
                std::unique_ptr<Admission> admission)
            : owner_(owner), at_(at), admission_(std::move(admission)) {}
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
        std::unique_ptr<Admission> admission_;  // released after the stream is unlisted
    };

    // A new request's admission, or nullptr once a drain or shutdown has begun (then it gets a
    // 503 and nothing else).
    std::unique_ptr<Admission> admit() {
        std::lock_guard lock(mutex_);
        if (draining_ || closing_) return nullptr;
        ++under_way_;
        return std::make_unique<Admission>(*this);
    }

    // From now on admit() refuses; the requests admitted before stay under way until they end.
    void begin_drain() {
        std::lock_guard lock(mutex_);
        draining_ = true;
    }

    std::unique_ptr<Listing> add(std::shared_ptr<smol::GenerationStream> stream, std::unique_ptr<Admission> admission) {
        std::lock_guard lock(mutex_);
        if (closing_) stream->cancel();
        return std::make_unique<Listing>(*this, streams_.insert(streams_.end(), std::move(stream)), std::move(admission));
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

    // Requests under way: admitted and not yet ended (being parsed, queued, generating, or their
    // last bytes going out). What a drain waits for.
    std::size_t under_way() const {
        std::lock_guard lock(mutex_);
        return under_way_;
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
    std::size_t under_way_ = 0;  // live Admissions
    bool draining_ = false;
    bool closing_ = false;
};

}  // namespace smol_server
