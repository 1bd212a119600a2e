#pragma once
// Serves many generation requests at once on one model, the way a chat server needs it.
//
// The scheduler owns the model, a fixed number of slots (each a Sequence, generate/sequence.hpp:
// a KV cache, the tokens it holds and the generation on it, the same one a ChatSession runs
// alone), a queue of waiting requests and one worker thread. Each step of the worker:
//   1. admits waiting requests into free slots: a continued conversation into its own slot (it
//      only runs its new tokens; the Sequence does the reuse), a new one into an empty slot with
//      a copy of the longest prefix another slot shares with it (a common system prompt), and
//      only when no slot is empty into the slot sharing the longest prefix (place_locked);
//   2. builds one batch: the next chunk of each prompt still being read (at most prompt_chunk
//      tokens in total per step, so a long new prompt stalls the others by a bounded amount;
//      prompts take the budget in the order their requests were admitted, so a request that
//      came later never starves an earlier one) and one token for every slot that is generating,
//      with a draft when its request speculates (GenerationRequest::speculative): the drafts
//      share what the slots' own tokens leave of decode_rows per step, so a full batch drafts
//      nothing, and a slot whose drafts keep failing pauses drafting (Sequence's back-off);
//   3. runs Model::forward once for the whole batch (one pass over the weights for everyone);
//   4. steps each slot's Sequence whose prompt is read (its request's GenerationPipeline picks
//      the token) and streams the text, split into reasoning and answer, to the request's
//      GenerationStream, which the caller reads from any thread.
// The scheduler knows nothing about HTTP; a server maps streams onto responses.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/sequence.hpp"
#include "smol/text/grammar.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// submit() refuses a request because too many are already waiting (a server answers 503).
class QueueFullError : public Error {
public:
    using Error::Error;
};

// A slot's cache cannot be copied, replaced or erased now: the slot is serving a request, or
// the memory budget is held by running requests (a server answers 503: retry later).
class SlotBusyError : public Error {
public:
    using Error::Error;
};

struct SchedulerOptions {
    int slots = 4;             // requests generating at the same time
    int context = 0;           // tokens per slot's KV cache; 0: the model's default (4096)
    int max_queue = 32;        // requests waiting for a slot before submit() refuses more
    int prompt_chunk = 128;    // prompt tokens read per step across all slots
    // Rows per step for the generating slots' tokens and their drafts together (speculative
    // decoding): the drafts split evenly what the slots' own tokens leave, so they fill a narrow
    // batch and leave a full one alone (a row costs compute even where the weights are shared;
    // docs/speculative-decoding.md). At most the slots: no drafts.
    int decode_rows = 8;
    // Every request's default (smol-server --spec, --draft-max, --draft-min): applied to a request
    // whose own parameters do not speculate, unless it says `speculative = false`. A request that
    // says `speculative = true` drafts by prompt lookup with this draft_max and draft_min even
    // when this type is none.
    SpeculationParams speculation;
    // Memory the slots' KV caches may take together; 0: every slot may hold one. Idle caches
    // (finished requests kept for prefix reuse) are freed, least recently used first, when a
    // new request needs memory. A budget below one cache still allows one.
    std::size_t cache_budget_bytes = 0;
};

struct GenerationRequest {
    std::vector<std::int32_t> prompt;  // the rendered chat, tokenized with special tokens
    std::string assistant_prefix;      // ChatPrompt::assistant_prefix of that chat
    GenerationParams params;
    // Whether this request drafts (speculative decoding), over the scheduler's default: unset
    // keeps params.speculation, or SchedulerOptions::speculation when that does not speculate;
    // true drafts (params.speculation when it speculates, else prompt lookup with the options'
    // draft_max and draft_min); false never drafts. The reply is the same either way.
    std::optional<bool> speculative;
    // Whose cache this request may reuse: a slot's cached prefix is reused only by a request of
    // the same partition (a server's tenant: its API key, a cache salt), since reuse shows in
    // cached_tokens and timing and so would leak another tenant's prompt. Empty is a partition
    // like any other: requests that name none share as before.
    std::string cache_partition;
    // Which slot runs the request (llama-server's id_slot): that slot's cache, waiting for it
    // while it is busy; -1 lets the scheduler pick the slot sharing the longest prefix.
    int slot = -1;
};

// The speculation a request runs with, given the scheduler's default (GenerationRequest::speculative).
inline SpeculationParams request_speculation(const GenerationRequest& request, const SpeculationParams& fallback) {
    SpeculationParams chosen = request.params.speculation.enabled() ? request.params.speculation : fallback;
    if (request.speculative == false) chosen.type = SpeculationType::none;
    else if (request.speculative == true && !chosen.enabled()) chosen.type = SpeculationType::ngram;
    return chosen;
}

// What a stream delivers: text since the last event and, once, the end.
// The text (reasoning, answer, tool calls, log-probabilities) produced since the last event.
struct StreamEvent : TextDelta {
    StreamEvent() = default;
    explicit StreamEvent(TextDelta text) : TextDelta(std::move(text)) {}

    bool finished = false;
    FinishReason finish = FinishReason::end_of_generation;  // meaningful once finished
    std::string error;      // set when finish == error
    std::string stop_string;  // set when finish == stop_string: which of the request's stops ended it
    // With finish == error: the request itself went past a limit while generating (its grammar
    // needed more than a token's budget), a client error rather than the server's.
    bool request_past_limit = false;
    GenerationUsage usage;  // final when finished
    int slot = -1;          // once finished: the slot that ran the request (-1: it never got one)

    // Adds a later event: its text after this one's, its end state in place of this one's.
    void append(StreamEvent&& later) {
        TextDelta::append(later);
        finished = later.finished;
        finish = later.finish;
        error = std::move(later.error);
        stop_string = std::move(later.stop_string);
        request_past_limit = later.request_past_limit;
        usage = later.usage;
        slot = later.slot;
    }
};

// The thread-safe channel between the worker and whoever reads a request's output.
class GenerationStream {
public:
    explicit GenerationStream(std::uint64_t id) : id_(id) {}

    std::uint64_t id() const { return id_; }

    // Everything produced since the last call, merged into one event, waiting up to `timeout`
    // for something to arrive; nullopt if nothing did. After the finished event, returns nullopt.
    std::optional<StreamEvent> next(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !pending_.empty(); });
        if (pending_.empty()) return std::nullopt;
        StreamEvent merged = std::move(pending_.front());
        pending_.pop_front();
        while (!pending_.empty() && !merged.finished) {
            merged.append(std::move(pending_.front()));
            pending_.pop_front();
        }
        return merged;
    }

    // Reads until the end: the whole reasoning and answer in one event.
    StreamEvent collect() {
        StreamEvent all;
        while (!all.finished) {
            auto e = next(std::chrono::milliseconds(1000));
            if (e) all.append(std::move(*e));
        }
        return all;
    }

    // Asks the worker to stop this request; it does before sampling its next token and
    // frees the slot. Safe from any thread, any number of times.
    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
    bool cancel_requested() const { return cancelled_.load(std::memory_order_relaxed); }
    bool finished() const { return finished_.load(std::memory_order_acquire); }

private:
    friend class Scheduler;
    void push(StreamEvent event) {
        {
            std::lock_guard lock(mutex_);
            if (event.finished) finished_.store(true, std::memory_order_release);
            pending_.push_back(std::move(event));
        }
        ready_.notify_all();
    }

    std::uint64_t id_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<StreamEvent> pending_;
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> finished_{false};
};

// Counters for monitoring (a server's /metrics).
struct SchedulerStats {
    std::uint64_t requests_submitted = 0;
    std::uint64_t requests_finished = 0;
    std::uint64_t requests_cancelled = 0;
    std::uint64_t requests_rejected = 0;  // queue full or prompt too long
    std::uint64_t prompt_tokens = 0;      // prompt tokens run through the model
    std::uint64_t cached_tokens = 0;      // prompt tokens reused from slot caches
    std::uint64_t generated_tokens = 0;
    std::uint64_t drafted_tokens = 0;     // speculation: drafted tokens checked by the model
    std::uint64_t accepted_tokens = 0;    // of those, the ones it picked too
    std::uint64_t forward_calls = 0;
    double busy_seconds = 0;              // time inside Model::forward and sampling
    double generation_tokens_per_second = 0;  // generated tokens per busy second, recent steps
    int queue_depth = 0;
    int active_slots = 0;
    int slots = 0;
    std::size_t cache_bytes = 0;          // KV cache memory currently allocated
};

class Scheduler {
public:
    // The engine must outlive the scheduler; other users of it (a ChatSession) share its
    // forward lock.
    Scheduler(Engine& engine, SchedulerOptions options) : engine_(&engine), options_(options) {
        if (options_.slots <= 0) fail("scheduler: expected at least one slot, found ", options_.slots);
        if (options_.max_queue < 0) fail("scheduler: expected a queue limit >= 0, found ", options_.max_queue);
        if (options_.prompt_chunk <= 0)
            fail("scheduler: expected a positive prompt chunk size, found ", options_.prompt_chunk);
        if (options_.context < 0) fail("scheduler: expected a context size >= 0, found ", options_.context);
        if (options_.decode_rows < 0) fail("scheduler: expected decode rows >= 0, found ", options_.decode_rows);
        options_.speculation.validate();
        if (options_.context == 0) options_.context = kDefaultContext;
        slots_.resize(std::size_t(options_.slots));
        // The size of one cache, measured once on a tiny cache of the same shape.
        const KvCache probe = engine_->make_cache(1);
        cache_bytes_ = probe.bytes() * std::size_t(options_.context);
        worker_ = std::thread([this] { run(); });
    }

    ~Scheduler() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (worker_.joinable()) worker_.join();
    }

    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    const Engine& engine() const { return *engine_; }
    const text::Tokenizer& tokenizer() const { return engine_->tokenizer(); }
    const SchedulerOptions& options() const { return options_; }
    int context() const { return options_.context; }
    std::size_t cache_bytes_per_slot() const { return cache_bytes_; }

    // Queues a request; its output arrives on the returned stream. Throws PromptTooLongError
    // or QueueFullError (and smol::Error for bad sampling parameters) without queueing.
    std::shared_ptr<GenerationStream> submit(GenerationRequest request) {
        if (request.prompt.empty()) fail("scheduler: the prompt is empty; at least one token is needed");
        for (std::int32_t t : request.prompt)
            if (t < 0 || t >= engine_->n_vocab())
                fail("scheduler: prompt token ", t, " is outside the vocabulary [0, ", engine_->n_vocab(), ")");
        if (request.slot < -1 || request.slot >= options_.slots)
            fail("scheduler: slot ", request.slot, " does not exist; expected -1 (any) or 0 to ", options_.slots - 1);
        if (!prompt_fits(request.prompt.size(), options_.context)) {
            std::lock_guard lock(mutex_);
            ++stats_.requests_rejected;
            throw PromptTooLongError(prompt_too_long_message(request.prompt.size(), options_.context));
        }
        request.params.speculation = request_speculation(request, options_.speculation);
        // Validates the parameters; the request's clock starts here.
        auto pipeline = std::make_unique<GenerationPipeline>(engine_->tokenizer(), request.params, request.prompt,
                                                             request.assistant_prefix);
        std::lock_guard lock(mutex_);
        // The queue holds requests that wait for a slot and, until the loop's next turn, those that
        // found one free; only the first count against max_queue, so with max_queue 0 a request is
        // refused when no slot is free rather than always. A new request waits when the queue
        // speaks for every free slot or the slot it names is busy.
        const int queued = int(queue_.size());
        const int free_slots = free_slots_locked();
        const int waiting = std::max(0, queued - free_slots);
        const bool would_wait = queued >= free_slots || (request.slot >= 0 && slots_[std::size_t(request.slot)].active);
        if (would_wait && waiting >= options_.max_queue) {
            ++stats_.requests_rejected;
            throw QueueFullError("the server is busy: " + std::to_string(waiting) +
                                 " requests are already waiting for a slot; retry later");
        }
        auto stream = std::make_shared<GenerationStream>(++next_id_);
        // The stream lives as long as the pipeline (both are the job's).
        pipeline->set_cancelled([s = stream.get()] { return s->cancel_requested(); });
        Pending p;
        p.request = std::move(request);
        p.stream = stream;
        p.pipeline = std::move(pipeline);
        queue_.push_back(std::move(p));
        ++stats_.requests_submitted;
        wake_.notify_all();
        return stream;
    }

    SchedulerStats stats() const {
        std::lock_guard lock(mutex_);
        SchedulerStats s = stats_;
        s.queue_depth = int(queue_.size());
        s.slots = options_.slots;
        s.active_slots = 0;
        s.cache_bytes = 0;
        for (const Slot& slot : slots_) {
            if (slot.active) ++s.active_slots;
            if (slot.sequence.has_cache()) s.cache_bytes += cache_bytes_;
        }
        return s;
    }

    // What each slot is doing, for a server's /slots.
    struct SlotState {
        int id;
        bool processing;            // generating for a request now
        std::size_t cached_tokens;  // tokens its KV cache holds (reusable by a request with that prefix)
    };
    std::vector<SlotState> slot_states() const {
        std::lock_guard lock(mutex_);
        std::vector<SlotState> out;
        for (std::size_t i = 0; i < slots_.size(); ++i)
            out.push_back({int(i), slots_[i].active, slots_[i].sequence.tokens().size()});
        return out;
    }

    // What a slot's cache holds, copied (only its filled positions), for a cache file.
    struct SlotCopy {
        std::optional<KvCache> cache;      // none when the slot holds no cache
        std::vector<std::int32_t> tokens;  // the tokens it holds
        std::string partition;             // GenerationRequest::cache_partition of what it holds
    };
    // Throws SlotBusyError while the slot serves a request.
    SlotCopy copy_slot(int slot) const {
        std::lock_guard lock(mutex_);
        const Slot& s = slots_[idle_slot_locked(slot, "copied")];
        SlotCopy copy;
        if (const KvCache* cache = s.sequence.cache()) copy.cache = cache->copy();
        copy.tokens.assign(s.sequence.tokens().begin(), s.sequence.tokens().end());
        copy.partition = s.cache_partition;
        return copy;
    }

    // An empty cache of the slots' size and types (what restore_slot takes, filled).
    KvCache make_slot_cache() const { return engine_->make_cache(options_.context); }

    // Puts `cache`, holding `tokens`, into an idle slot as the prompt cache of `partition`'s
    // requests, in place of what it held. It counts against the memory budget as any slot's
    // cache: idle ones are freed for it, least recently used first. Throws SlotBusyError while
    // the slot serves a request or running requests hold the budget.
    void restore_slot(int slot, KvCache cache, std::vector<std::int32_t> tokens, std::string partition) {
        std::lock_guard lock(mutex_);
        Slot& s = slots_[idle_slot_locked(slot, "restored")];
        if (!s.sequence.has_cache() && !make_room_locked(&s))
            throw SlotBusyError("slot " + std::to_string(slot) +
                                " cannot be restored now: running requests hold the cache memory budget (--cache-budget)");
        s.prompt_length = tokens.size();
        s.sequence.adopt(std::move(cache), std::move(tokens));
        s.sequence.set_step_costs(&engine_->step_costs());
        s.cache_partition = std::move(partition);
        s.last_used = Clock::now();
    }

    // Forgets what an idle slot's cache holds; how many tokens that was. Throws SlotBusyError
    // while the slot serves a request.
    std::size_t erase_slot(int slot) {
        std::lock_guard lock(mutex_);
        Slot& s = slots_[idle_slot_locked(slot, "erased")];
        const std::size_t n = s.sequence.tokens().size();
        s.sequence.reset();
        return n;
    }

    // The tokens each slot's cache holds (for tests and diagnostics).
    std::vector<std::vector<std::int32_t>> cached_tokens() const {
        std::lock_guard lock(mutex_);
        std::vector<std::vector<std::int32_t>> out;
        for (const Slot& slot : slots_) out.emplace_back(slot.sequence.tokens().begin(), slot.sequence.tokens().end());
        return out;
    }

private:
    using Clock = std::chrono::steady_clock;

    // Under mutex_: slot `slot` when it exists and serves no request (`what`: what was to be
    // done to it, for the error).
    std::size_t idle_slot_locked(int slot, const char* what) const {
        if (slot < 0 || slot >= options_.slots)
            fail("scheduler: slot ", slot, " does not exist; expected 0 to ", options_.slots - 1);
        if (slots_[std::size_t(slot)].active)
            throw SlotBusyError("slot " + std::to_string(slot) + " is serving a request and cannot be " + what +
                                " until it finishes; retry later");
        return std::size_t(slot);
    }

    struct Pending {
        GenerationRequest request;
        std::shared_ptr<GenerationStream> stream;
        std::unique_ptr<GenerationPipeline> pipeline;
    };

    struct Slot {
        // Its cache (none until a request needs it, or after it was freed for memory) and the
        // tokens it holds; those are read by other threads under mutex_, so the worker changes
        // them under it.
        Sequence sequence;
        Clock::time_point last_used{};
        std::string cache_partition;  // GenerationRequest::cache_partition of what the cache holds
        std::size_t prompt_length = 0;  // the prompt tokens of the last request (or restored tokens)
        // The request being served; only the worker touches what follows `active`.
        bool active = false;
        Pending job;
        std::uint64_t admitted = 0;        // when the request was admitted (a count of admissions)
        double sitting_out = 0;            // seconds of the others' steps it waits out (fair share)
    };

    // A slot whose own step (sampling, and the grammar walk that filters it) took longer than
    // this sits out the next steps for three times that time while other slots have work: a
    // grammar just under its per-token budget would otherwise add its walk to every step of
    // every stream, and with it a plain stream beside it keeps about three quarters of its
    // speed. A slot alone never waits, and ordinary sampling takes far less than this.
    static constexpr double kFairShareGraceSeconds = 0.005;
    static constexpr double kFairShareFactor = 3.0;

    // Under mutex_: moves waiting requests into free slots while memory allows.
    void admit_locked() {
        // Requests cancelled while waiting leave the queue wherever they are in it.
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (!it->stream->cancel_requested()) {
                ++it;
                continue;
            }
            StreamEvent e;
            e.finished = true;
            e.finish = FinishReason::cancelled;
            it->pipeline->begin_prompt(0);  // ends the queue time
            e.usage = it->pipeline->usage();
            it->stream->push(std::move(e));
            ++stats_.requests_cancelled;
            it = queue_.erase(it);
        }
        for (auto it = queue_.begin(); it != queue_.end();) {
            Pending& p = *it;
            const Placement place = place_locked(p.request);
            if (!place.slot && p.request.slot >= 0) {
                ++it;  // waits for the slot it names; those behind it may take the others
                continue;
            }
            if (!place.slot) return;  // every slot busy
            Slot& slot = *place.slot;
            if (!slot.sequence.has_cache() && !make_room_locked(&slot)) return;
            start_locked(slot, std::move(p), place);
            it = queue_.erase(it);
        }
    }

    // Where a waiting request runs: `slot` (nullptr: no free slot it may run in), and the slot
    // whose cache lends it the `prefix` it shares with the prompt when that is another one.
    struct Placement {
        Slot* slot = nullptr;
        const Slot* prefix_from = nullptr;
        std::size_t prefix = 0;
    };

    // Under mutex_, in this order:
    //   1. a free slot the prompt continues (it keeps the whole prompt of the slot's last request,
    //      as a conversation's next turn does): the longest such;
    //   2. a free slot holding no tokens, while memory holds its cache without freeing another's:
    //      the longest prefix any slot shares with the prompt is copied into it, so a new
    //      conversation reuses a common system prompt without taking the cache of a conversation
    //      that is coming back (with prefix-first, its next turn found its slot taken);
    //   3. the free slot sharing the longest prefix; among equals one without a cache (nothing to
    //      lose), then the least recently used.
    Placement place_locked(const GenerationRequest& request) {
        Placement continued, fresh, shared;
        const auto rank = [](const Slot& s, std::size_t prefix) {
            return std::tuple(prefix, !s.sequence.has_cache(), -s.last_used.time_since_epoch().count());
        };
        for (Slot& slot : slots_) {
            if (slot.active || !may_run(slot, request)) continue;
            const std::size_t prefix = reusable_prefix(slot, request);
            const std::size_t last_prompt = std::min(slot.prompt_length, slot.sequence.tokens().size());
            if (last_prompt > 0 && prefix >= last_prompt && prefix > continued.prefix) continued = {&slot, nullptr, prefix};
            // Holding no tokens; one whose cache is allocated already first.
            if (slot.sequence.tokens().empty() &&
                (!fresh.slot || slot.sequence.has_cache() > fresh.slot->sequence.has_cache()))
                fresh.slot = &slot;
            if (!shared.slot || rank(slot, prefix) > rank(*shared.slot, shared.prefix)) shared = {&slot, nullptr, prefix};
        }
        if (continued.slot) return continued;
        if (!fresh.slot || !(fresh.slot->sequence.has_cache() || room_for_one_more_locked())) return shared;
        for (const Slot& slot : slots_)  // the lender may be serving a request: its prefix stays put
            if (const std::size_t prefix = reusable_prefix(slot, request); prefix > fresh.prefix) {
                fresh.prefix_from = &slot;
                fresh.prefix = prefix;
            }
        return fresh;
    }

    int free_slots_locked() const {
        int free = 0;
        for (const Slot& s : slots_) free += s.active ? 0 : 1;
        return free;
    }

    // Whether one more cache fits the memory budget with every cache allocated now kept (the
    // first always does, whatever the budget).
    bool room_for_one_more_locked() const {
        if (options_.cache_budget_bytes == 0) return true;
        std::size_t allocated = 0;
        for (const Slot& s : slots_)
            if (s.sequence.has_cache()) ++allocated;
        return allocated == 0 || (allocated + 1) * cache_bytes_ <= options_.cache_budget_bytes;
    }

    // Frees idle caches (least recently used first) until one more fits the budget; false if
    // it cannot fit yet because active requests hold the memory.
    bool make_room_locked(Slot* target) {
        while (!room_for_one_more_locked()) {
            Slot* victim = nullptr;
            for (Slot& s : slots_)
                if (&s != target && !s.active && s.sequence.has_cache() && (!victim || s.last_used < victim->last_used))
                    victim = &s;
            if (!victim) return false;
            victim->sequence.release_cache();
        }
        return true;
    }

    // Whether the request may run in `slot`: any slot, or the one it names.
    bool may_run(const Slot& slot, const GenerationRequest& request) const {
        return request.slot < 0 || &slot == &slots_[std::size_t(request.slot)];
    }

    // How much of the request's prompt the slot's cache may give it: none across partitions.
    static std::size_t reusable_prefix(const Slot& slot, const GenerationRequest& request) {
        if (slot.cache_partition != request.cache_partition) return 0;
        return slot.sequence.shared_prefix(request.prompt);
    }

    // Starts the request in the slot `place` chose, with the prefix it lends from another slot.
    void start_locked(Slot& slot, Pending p, const Placement& place) {
        if (!slot.sequence.has_cache()) {
            slot.sequence.set_cache(engine_->make_cache(options_.context));
            slot.sequence.set_step_costs(&engine_->step_costs());
        }
        // Another partition's tokens go before start() could keep any of them.
        if (slot.cache_partition != p.request.cache_partition) {
            slot.sequence.reset();
            slot.cache_partition = p.request.cache_partition;
        }
        // Under mutex_, but a copy of n positions costs far less than running them.
        if (place.prefix_from) slot.sequence.copy_prefix_from(place.prefix_from->sequence, place.prefix);
        slot.prompt_length = p.request.prompt.size();
        // submit() checked the prompt against this context, so start() does not throw here. The
        // pipeline stays where it is when the job moves into the slot.
        stats_.cached_tokens += slot.sequence.start(p.request.prompt, p.pipeline.get());
        slot.active = true;
        slot.sitting_out = 0;
        slot.admitted = ++admissions_;
        slot.job = std::move(p);
    }

    // What one step runs, kept between steps so their buffers are reused.
    struct StepBatch {
        std::vector<float> logits;        // [rows, n_vocab]: each entry's last row, a verify step's every row
        std::vector<SequenceBatch> batch;  // one per running slot
        std::vector<Slot*> batched;        // the slot of each batch entry
        std::vector<Slot*> reading;        // slots still reading their prompt, first admitted first
    };

    // The worker: waits for work, builds a step from every running slot, runs it and records
    // it; at shutdown it ends every stream.
    void run() {
        StepBatch step;
        double recent_tokens = 0, recent_seconds = 0;
        while (wait_for_work()) {
            // Cancelled requests leave before the step, so they cost no more compute.
            for (Slot& slot : slots_)
                if (slot.active && slot.job.stream->cancel_requested()) finish(slot, FinishReason::cancelled, "");
            const std::vector<Slot*>& resting = slots_sitting_out();
            plan_step(resting, step);
            if (step.batch.empty()) continue;

            const auto step_start = Clock::now();
            const std::optional<int> sampled = run_step(step);
            if (!sampled) continue;  // the forward pass failed: its requests ended with the error
            const double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
            for (Slot* slot : resting) slot->sitting_out = std::max(0.0, slot->sitting_out - seconds);
            // A decaying window, so the rate follows the current load.
            recent_tokens = recent_tokens * 0.9 + *sampled;
            recent_seconds = recent_seconds * 0.9 + seconds;
            std::lock_guard lock(mutex_);
            ++stats_.forward_calls;
            stats_.busy_seconds += seconds;
            stats_.generation_tokens_per_second = recent_seconds > 0 ? recent_tokens / recent_seconds : 0.0;
        }
        end_all_streams();
    }

    // Waits until a slot has work or a queued request can be admitted, and admits what fits;
    // false once the scheduler is stopping.
    bool wait_for_work() {
        std::unique_lock lock(mutex_);
        // The timeout lets requests cancelled while queued leave the queue soon.
        wake_.wait_for(lock, std::chrono::milliseconds(200), [&] {
            if (stopping_) return true;
            for (const Slot& s : slots_)
                if (s.active) return true;
            return !queue_.empty() && can_admit_locked();
        });
        if (stopping_) return false;
        admit_locked();
        return true;
    }

    // The step's batch: decoding slots first (each runs the token it picked, and its draft
    // within its share of decode_rows): they are always in the batch. Prompts share the
    // budget in the order their requests were admitted.
    void plan_step(const std::vector<Slot*>& resting, StepBatch& step) {
        step.batch.clear();
        step.batched.clear();
        int prompt_budget = options_.prompt_chunk;
        const auto rests = [&](const Slot& slot) {
            return std::find(resting.begin(), resting.end(), &slot) != resting.end();
        };
        int decoding = 0, speculating = 0;
        for (const Slot& slot : slots_)
            if (slot.active && !slot.sequence.reading_prompt() && !rests(slot)) {
                ++decoding;
                if (slot.job.pipeline->speculation().enabled()) ++speculating;
            }
        const int room = std::max(0, options_.decode_rows - decoding);
        const std::size_t draft_share = speculating > 0 ? std::size_t(room / speculating) : 0;
        for (Slot& slot : slots_) {
            if (!slot.active || slot.sequence.reading_prompt() || rests(slot)) continue;
            step.batch.push_back(slot.sequence.next_input(Sequence::kWholePrompt, draft_share));
            step.batched.push_back(&slot);
        }
        step.reading.clear();
        for (Slot& slot : slots_)
            if (slot.active && slot.sequence.reading_prompt()) step.reading.push_back(&slot);
        std::sort(step.reading.begin(), step.reading.end(),
                  [](const Slot* a, const Slot* b) { return a->admitted < b->admitted; });
        for (Slot* reader : step.reading) {
            if (prompt_budget == 0) break;
            step.batch.push_back(reader->sequence.next_input(std::size_t(prompt_budget)));
            step.batched.push_back(reader);
            prompt_budget -= int(step.batch.back().tokens.size());
        }
    }

    // One forward pass over the batch, then each entry's sampling step; the tokens sampled, or
    // nullopt when the forward pass threw (every batched request ends with its error).
    std::optional<int> run_step(StepBatch& step) {
        const std::size_t n_vocab = std::size_t(engine_->n_vocab());
        // A verify step gives every row of its entry; the others their last.
        std::size_t rows = 0;
        for (const SequenceBatch& entry : step.batch) rows += entry.all_logits ? entry.tokens.size() : 1;
        step.logits.resize(rows * n_vocab);
        try {
            engine_->forward(step.batch, step.logits.data());
        } catch (const std::exception& e) {
            for (Slot* slot : step.batched) finish(*slot, FinishReason::error, e.what());
            return std::nullopt;
        }
        int sampled = 0;
        std::size_t row = 0;  // the first logit row of batch[b]
        for (std::size_t b = 0; b < step.batch.size(); ++b) {
            const std::size_t entry_rows = step.batch[b].all_logits ? step.batch[b].tokens.size() : 1;
            const std::span<float> entry_logits =
                std::span<float>(step.logits).subspan(row * n_vocab, entry_rows * n_vocab);
            row += entry_rows;
            sampled += step_slot(*step.batched[b], step.batch[b].tokens.size(), entry_logits);
        }
        return sampled;
    }

    // Records that `slot` ran `ran` tokens and, once its prompt is read, samples from its logits;
    // the tokens it sampled. Any failure ends the slot's request with its error.
    int step_slot(Slot& slot, std::size_t ran, std::span<float> entry_logits) {
        try {
            std::lock_guard lock(mutex_);  // the tokens are read by cached_tokens()
            if (slot.sequence.reading_prompt()) stats_.prompt_tokens += ran;
            slot.sequence.ran(ran);
        } catch (const std::exception& e) {  // the cache and its record disagree: reset
            finish(slot, FinishReason::error, e.what());
            return 0;
        }
        if (!slot.sequence.wants_step()) return 0;  // more of the prompt to read
        int sampled = 0;
        try {
            TextDelta delta;
            const GenerationUsage before = slot.job.pipeline->usage();
            const auto own_step_start = Clock::now();
            const bool ended = slot.sequence.step(entry_logits, delta);
            const double own_step = std::chrono::duration<double>(Clock::now() - own_step_start).count();
            slot.sitting_out = own_step > kFairShareGraceSeconds ? kFairShareFactor * own_step : 0.0;
            const GenerationUsage& after = slot.job.pipeline->usage();
            sampled = after.completion_tokens - before.completion_tokens;
            on_token(slot, ended, std::move(delta), after.completion_tokens - before.completion_tokens,
                     after.drafted_tokens - before.drafted_tokens, after.accepted_tokens - before.accepted_tokens);
        } catch (const GenerationCancelled&) {
            finish(slot, FinishReason::cancelled, "");
        } catch (const text::GrammarTooComplex& e) {
            finish(slot, FinishReason::error, e.what(), {}, /*request_past_limit=*/true);
        } catch (const std::exception& e) {
            finish(slot, FinishReason::error, e.what());
        }
        return sampled;
    }

    // Shutting down: nobody will read these streams' ends otherwise.
    void end_all_streams() {
        for (Slot& slot : slots_)
            if (slot.active) finish(slot, FinishReason::cancelled, "");
        std::lock_guard lock(mutex_);
        for (Pending& p : queue_) {
            StreamEvent e;
            e.finished = true;
            e.finish = FinishReason::cancelled;
            p.stream->push(std::move(e));
        }
        queue_.clear();
    }

    // The generating slots that sit out this step (fair share: see kFairShareGraceSeconds), or
    // none when no other slot has work for it.
    const std::vector<Slot*>& slots_sitting_out() {
        resting_.clear();
        bool others = false;
        for (Slot& slot : slots_) {
            if (!slot.active) continue;
            if (slot.sitting_out > 0 && !slot.sequence.reading_prompt()) resting_.push_back(&slot);
            else others = true;
        }
        if (!others) {
            for (Slot* slot : resting_) slot->sitting_out = 0;
            resting_.clear();
        }
        return resting_;
    }

    // Under mutex_: whether a waiting request could get a slot now.
    bool can_admit_locked() const {
        for (const Slot& s : slots_)
            if (!s.active)
                for (const Pending& p : queue_)
                    if (may_run(s, p.request)) return true;
        return false;
    }

    // Tokens were picked: one, or after a verify step the draft's tokens the model took and the
    // one after them (the slot's Sequence runs the last next step unless the generation ended).
    void on_token(Slot& slot, bool ended, TextDelta delta, int picked, int drafted, int accepted) {
        {
            std::lock_guard lock(mutex_);  // counted before the stream can see the tokens
            stats_.generated_tokens += std::uint64_t(picked);
            stats_.drafted_tokens += std::uint64_t(drafted);
            stats_.accepted_tokens += std::uint64_t(accepted);
        }
        if (ended) {
            finish(slot, slot.job.pipeline->finish_reason(), "", std::move(delta));
            return;
        }
        if (!delta.empty()) slot.job.stream->push(StreamEvent{std::move(delta)});
    }

    // Ends the slot's request: the pipeline flushes held-back text, the final event goes out,
    // and the slot is freed (its cache and tokens stay for prefix reuse).
    void finish(Slot& slot, FinishReason reason, const std::string& error, TextDelta text = {},
                bool request_past_limit = false) {
        GenerationPipeline& pipeline = *slot.job.pipeline;
        pipeline.finish(reason, text);
        StreamEvent e{std::move(text)};
        e.finished = true;
        e.finish = pipeline.finish_reason();
        e.error = error;
        e.stop_string = pipeline.matched_stop();
        e.request_past_limit = request_past_limit;
        e.usage = pipeline.usage();
        e.slot = int(&slot - slots_.data());
        {
            std::lock_guard lock(mutex_);
            if (e.finish == FinishReason::cancelled) ++stats_.requests_cancelled;
            else ++stats_.requests_finished;
            if (e.finish == FinishReason::error) slot.sequence.reset();  // the cache may be half-written
            else slot.sequence.end();
            slot.active = false;
            slot.last_used = Clock::now();
        }
        slot.job.stream->push(std::move(e));
        slot.job = Pending{};
    }

    Engine* engine_;
    SchedulerOptions options_;
    std::size_t cache_bytes_ = 0;  // one slot's KV cache
    mutable std::mutex mutex_;  // guards queue_, stats_, slot bookkeeping read by other threads
    std::condition_variable wake_;
    std::deque<Pending> queue_;
    std::vector<Slot> slots_;
    std::vector<Slot*> resting_;  // the worker's: slots sitting out the current step
    SchedulerStats stats_;
    std::uint64_t next_id_ = 0;
    std::uint64_t admissions_ = 0;  // requests admitted into slots so far
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace smol
