// The batched multi-session scheduler on the tiny fixture models: batched decoding gives the
// same tokens as running each sequence alone, a continued prompt reuses the slot's cache,
// cancellation frees the slot, and the queue and context limits refuse cleanly.

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/generate/scheduler.hpp"
#include "smol/smol.hpp"
#include "smol/text/tokenizer.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_scheduler {

namespace {

smol::SamplerParams greedy() {
    smol::SamplerParams p;
    p.temperature = 0.0f;
    return p;
}


// Greedy generation of one sequence alone, straight on the model: the reference the batched
// scheduler must reproduce.
std::vector<std::int32_t> greedy_alone(smol::Engine& engine, const std::vector<std::int32_t>& prompt, int max_tokens) {
    const smol::text::Tokenizer& tokenizer = engine.tokenizer();
    smol::KvCache cache = engine.make_cache(512);
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    engine.forward(cache, prompt, logits.data(), false);
    std::vector<std::int32_t> out;
    smol::Sampler sampler(greedy(), engine.n_vocab());
    while (int(out.size()) < max_tokens) {
        const int token = sampler.sample(logits);
        out.push_back(token);
        if (tokenizer.is_end_of_generation(token)) break;
        const std::int32_t t = token;
        engine.forward(cache, std::span<const std::int32_t>(&t, 1), logits.data(), false);
    }
    return out;
}

// What a stream shows for these tokens: streamed decoding turns a character left unfinished
// at the end into U+FFFD.
std::string visible_text(const smol::text::Tokenizer& tokenizer, std::vector<std::int32_t> tokens) {
    if (!tokens.empty() && tokenizer.is_end_of_generation(tokens.back())) tokens.pop_back();
    smol::text::StreamDecoder decoder(tokenizer);
    std::string text;
    for (std::int32_t t : tokens) text += decoder.push(t);
    return text + decoder.flush();
}

// `slots` slots of `context` tokens each.
smol::SchedulerOptions slot_options(int slots, int context) {
    smol::SchedulerOptions options;
    options.slots = slots;
    options.context = context;
    return options;
}

smol::GenerationRequest request_for(std::vector<std::int32_t> prompt, int max_tokens) {
    smol::GenerationRequest r;
    r.prompt = std::move(prompt);
    r.params.sampling = greedy();
    r.params.max_tokens = max_tokens;
    return r;
}

// Until `want` slots generate (their requests left the queue for a slot); fails after a minute.
void wait_for_active_slots(const smol::Scheduler& scheduler, int want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (scheduler.stats().active_slots != want) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace

TEST_CASE("batched decoding of four sequences matches each sequence run alone") {
    smol::Engine& engine = smol_test::float_engine();
    const smol::text::Tokenizer& tokenizer = engine.tokenizer();
    const std::vector<std::string> texts = {
        "The quick brown fox", "Once upon a time there was", "<|im_start|>user\nHello!<|im_end|>\n",
        "Numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22"};
    const int max_tokens = 24;
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<std::string> expected;
    for (const auto& text : texts) {
        prompts.push_back(tokenizer.encode(text, true));
        const auto tokens = greedy_alone(engine, prompts.back(), max_tokens);
        // The comparison below is on answer text, so the reference must not contain think tags.
        const std::string visible = visible_text(tokenizer, tokens);
        REQUIRE(visible.find("<think>") == std::string::npos);
        expected.push_back(visible);
    }

    smol::SchedulerOptions options;
    options.slots = 4;
    options.context = 256;
    options.prompt_chunk = 16;  // the longest prompt is read over several steps, mixed with decoding
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    std::vector<std::shared_ptr<smol::GenerationStream>> streams;
    for (const auto& prompt : prompts) streams.push_back(scheduler.submit(request_for(prompt, max_tokens)));
    int total_tokens = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) {
        const smol::StreamEvent all = streams[i]->collect();
        CAPTURE(texts[i]);
        CHECK(all.error == "");
        CHECK(all.reasoning == "");
        CHECK(all.content == expected[i]);
        CHECK(all.usage.prompt_tokens == int(prompts[i].size()));
        CHECK(all.usage.cached_tokens == 0);
        total_tokens += all.usage.completion_tokens;
        CHECK((all.finish == smol::FinishReason::end_of_generation || all.finish == smol::FinishReason::stop_string ||
               all.finish == smol::FinishReason::max_tokens || all.finish == smol::FinishReason::context_full));  // ended by itself or by a limit
    }
    const auto stats = scheduler.stats();
    CHECK(stats.generated_tokens == std::uint64_t(total_tokens));
    CHECK(stats.requests_finished == 4);
    CHECK(stats.active_slots == 0);
    // Batched: far fewer forward passes than tokens generated one request at a time.
    CHECK(stats.forward_calls < std::uint64_t(total_tokens) / 2);
}

TEST_CASE("a continued conversation reuses the slot's cache and gives the same tokens") {
    const smol::SchedulerOptions options = slot_options(2, 256);
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();
    const auto first = tokenizer.encode("<|im_start|>user\nWhat is a cache?<|im_end|>\n<|im_start|>assistant\n", true);
    const smol::StreamEvent turn1 = scheduler.submit(request_for(first, 8))->collect();
    REQUIRE(turn1.finish != smol::FinishReason::error);
    CHECK(turn1.usage.cached_tokens == 0);

    auto second = first;
    const auto more = tokenizer.encode("Something else.<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n", true);
    second.insert(second.end(), more.begin(), more.end());
    const smol::StreamEvent turn2 = scheduler.submit(request_for(second, 8))->collect();
    CHECK(turn2.usage.prompt_tokens == int(second.size()));
    CHECK(turn2.usage.cached_tokens >= int(first.size()));
    CHECK(turn2.usage.cached_tokens < int(second.size()));
    CHECK(scheduler.stats().cached_tokens == std::uint64_t(turn2.usage.cached_tokens));

    // The same prompt on a fresh scheduler (nothing cached) must give the same text.
    smol::Scheduler fresh(smol_test::float_engine(), options);
    const smol::StreamEvent alone = fresh.submit(request_for(second, 8))->collect();
    CHECK(alone.usage.cached_tokens == 0);
    CHECK(alone.content == turn2.content);

    // Sending exactly a cached prompt again still runs its last token (it needs its logits).
    const smol::StreamEvent again = scheduler.submit(request_for(second, 8))->collect();
    CHECK(again.usage.cached_tokens == int(second.size()) - 1);
    CHECK(again.content == turn2.content);
}

TEST_CASE("a new conversation copies a shared prefix into a free slot and leaves another's cache for its next turn") {
    const smol::SchedulerOptions options = slot_options(2, 256);
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();
    const std::string system = "<|im_start|>system\nBe brief and exact in every answer.<|im_end|>\n";
    const auto a1 = tokenizer.encode(system + "<|im_start|>user\nWhat is a cache?<|im_end|>\n<|im_start|>assistant\n", true);
    const auto b1 = tokenizer.encode(system + "<|im_start|>user\nName a prime.<|im_end|>\n<|im_start|>assistant\n", true);
    const auto shared = tokenizer.encode(system + "<|im_start|>user\n", true);
    const auto starts_with = [](std::span<const std::int32_t> tokens, const std::vector<std::int32_t>& head) {
        return tokens.size() >= head.size() && std::equal(head.begin(), head.end(), tokens.begin());
    };
    REQUIRE(starts_with(a1, shared));
    REQUIRE(starts_with(b1, shared));

    const smol::StreamEvent a_turn1 = scheduler.submit(request_for(a1, 6))->collect();
    REQUIRE(a_turn1.finish != smol::FinishReason::error);
    // b shares the system prompt with a's idle slot: the prefix is copied into the empty slot.
    const smol::StreamEvent b_turn1 = scheduler.submit(request_for(b1, 6))->collect();
    CHECK(b_turn1.usage.cached_tokens >= int(shared.size()));
    CHECK(b_turn1.usage.cached_tokens < int(b1.size()));
    const auto caches = scheduler.cached_tokens();
    REQUIRE(caches.size() == 2);
    CHECK(starts_with(caches[0], a1));  // a's cache is whole
    CHECK(starts_with(caches[1], b1));

    // The copied keys and values give the reply a fresh run gives.
    smol::Scheduler fresh(smol_test::float_engine(), options);
    CHECK(fresh.submit(request_for(b1, 6))->collect().content == b_turn1.content);

    // a's next turn finds its own cache.
    auto a2 = a1;
    const auto more = tokenizer.encode("Memory.<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n", true);
    a2.insert(a2.end(), more.begin(), more.end());
    const smol::StreamEvent a_turn2 = scheduler.submit(request_for(a2, 6))->collect();
    CHECK(a_turn2.usage.cached_tokens >= int(a1.size()));
    // With both slots taken, a third conversation takes the least recently used one (b's).
    const auto c1 = tokenizer.encode(system + "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n", true);
    const smol::StreamEvent c_turn1 = scheduler.submit(request_for(c1, 6))->collect();
    CHECK(c_turn1.usage.cached_tokens >= int(shared.size()));
    CHECK(starts_with(scheduler.cached_tokens()[0], a2));
}

TEST_CASE("a cached prefix is reused only within its cache partition, and the reply is the same either way") {
    // One slot: the only cache there is holds the other partition's prompt.
    smol::SchedulerOptions options;
    options.slots = 1;
    options.context = 256;
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    const auto prompt = scheduler.tokenizer().encode(
        "<|im_start|>user\nA private question about my own data.<|im_end|>\n<|im_start|>assistant\n", true);
    const auto run = [&](const std::string& partition) {
        smol::GenerationRequest r = request_for(prompt, 6);
        r.cache_partition = partition;
        return scheduler.submit(std::move(r))->collect();
    };
    const smol::StreamEvent tenant_a = run("tenant-a");
    CHECK(tenant_a.usage.cached_tokens == 0);
    const smol::StreamEvent tenant_b = run("tenant-b");
    CHECK(tenant_b.usage.cached_tokens == 0);  // a's prompt is in the cache, b may not use it
    CHECK(tenant_b.content == tenant_a.content);
    const smol::StreamEvent tenant_b_again = run("tenant-b");
    CHECK(tenant_b_again.usage.cached_tokens == int(prompt.size()) - 1);
    CHECK(tenant_b_again.content == tenant_a.content);
    const smol::StreamEvent unpartitioned = run("");
    CHECK(unpartitioned.usage.cached_tokens == 0);
    const smol::StreamEvent unpartitioned_again = run("");
    CHECK(unpartitioned_again.usage.cached_tokens == int(prompt.size()) - 1);
    CHECK(unpartitioned_again.content == tenant_a.content);
}

TEST_CASE("reasoning and answer are split by the think tags, primed by the assistant prefix") {
    smol::SchedulerOptions options;
    options.slots = 1;
    options.context = 128;
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();
    const auto base = tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", true);

    // Generation starting inside an open think block is all reasoning.
    auto in_think = base;
    in_think.push_back(*tokenizer.find("<think>"));
    // Sampled, so the text is not one repeated token.
    smol::SamplerParams sampled;
    sampled.temperature = 1.0f;
    sampled.top_k = 0;
    sampled.min_p = 0.0f;
    sampled.top_p = 1.0f;
    sampled.seed = 7;
    auto r = request_for(in_think, 6);
    r.params.sampling = sampled;
    r.assistant_prefix = "<think>";
    const smol::StreamEvent thinking = scheduler.submit(r)->collect();
    CHECK(thinking.content == "");
    CHECK(thinking.reasoning != "");

    // After a closed (empty) think block, it is all answer.
    auto after = base;
    const auto closed = tokenizer.encode("<think>\n\n</think>\n", true);
    after.insert(after.end(), closed.begin(), closed.end());
    r = request_for(after, 6);
    r.params.sampling = sampled;
    r.assistant_prefix = "<think>\n\n</think>\n";
    const smol::StreamEvent answer = scheduler.submit(r)->collect();
    CAPTURE(answer.reasoning);
    CAPTURE(answer.usage.completion_tokens);
    CAPTURE(std::string(smol::to_string(answer.finish)));
    CHECK(answer.reasoning == "");
    CHECK(answer.content != "");
}

TEST_CASE("max_tokens and stop strings end generation with the right finish reason") {
    smol::SchedulerOptions options;
    options.slots = 1;
    options.context = 128;
    smol::Scheduler scheduler(smol_test::float_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();
    const auto prompt = tokenizer.encode("The quick brown fox", true);
    const auto limited = scheduler.submit(request_for(prompt, 5))->collect();
    const auto reference = greedy_alone(smol_test::float_engine(), prompt, 5);
    REQUIRE(reference.size() == 5);  // no end of generation within 5 tokens on this prompt
    CHECK(limited.finish == smol::FinishReason::max_tokens);
    CHECK(limited.usage.completion_tokens == 5);
    CHECK(limited.content == visible_text(tokenizer, reference));

    // Stop at the text of the third generated token: the answer is what came before it.
    const std::string before = tokenizer.decode(std::vector<std::int32_t>(reference.begin(), reference.begin() + 2));
    const std::string third = tokenizer.decode(std::vector<std::int32_t>(reference.begin() + 2, reference.begin() + 3));
    REQUIRE(!third.empty());
    REQUIRE(before.find(third) == std::string::npos);
    auto r = request_for(prompt, 5);
    r.params.stop = {third};
    const auto stopped = scheduler.submit(r)->collect();
    CHECK(stopped.finish == smol::FinishReason::stop_string);
    CHECK(stopped.content == before);
    CHECK(stopped.usage.completion_tokens == 3);
}

TEST_CASE("prompts are read in the order their requests were admitted, not in slot order") {
    // A reads briefly in slot 0, B a long prompt in slot 1; C then takes slot 0. Read in slot
    // order, C would have the whole budget of every step until its prompt was done, and B (older)
    // would wait behind it.
    smol::SchedulerOptions options;
    options.slots = 2;
    options.context = 512;
    options.prompt_chunk = 4;
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const smol::text::Tokenizer& tokenizer = scheduler.tokenizer();
    std::string long_text;
    for (int i = 0; i < 150; ++i) long_text += "word" + std::to_string(i) + " ";
    const auto long_prompt = tokenizer.encode(long_text, true);
    REQUIRE(long_prompt.size() > 200);

    // A generates 16 tokens, so B (submitted at once) is admitted beside it, into slot 1: wait
    // for both. Reading at most 4 prompt tokens a step, B is still reading when A is done.
    const auto a = scheduler.submit(request_for(tokenizer.encode("Hi", true), 16));
    const auto b = scheduler.submit(request_for(long_prompt, 1));
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (scheduler.stats().active_slots < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(scheduler.stats().active_slots == 2);
    CHECK(a->collect().error == "");
    REQUIRE(scheduler.stats().active_slots == 1);  // B is still reading
    const auto c = scheduler.submit(request_for(long_prompt, 1));
    struct Seen {
        std::chrono::steady_clock::time_point first;  // the stream's first event
        std::string error;
    };
    const auto watch = [](const std::shared_ptr<smol::GenerationStream>& s) {
        Seen seen;
        bool any = false;
        while (true) {
            const std::optional<smol::StreamEvent> e = s->next(std::chrono::milliseconds(1000));
            if (!e) continue;
            if (!any) seen.first = std::chrono::steady_clock::now();
            any = true;
            seen.error += e->error;
            if (e->finished) return seen;
        }
    };
    Seen seen_c;
    std::thread watch_c([&] { seen_c = watch(c); });
    const Seen seen_b = watch(b);
    watch_c.join();
    CHECK(seen_b.error == "");
    CHECK(seen_c.error == "");
    CHECK(seen_b.first < seen_c.first);
}

TEST_CASE("a grammar at its per-token budget sits out steps, so a plain stream beside it is not held to its pace") {
    // Counted in tokens, not timed: in lockstep every step would give each stream one token; the
    // fair share lets the plain stream run several steps alone for each costly grammar step.
    smol::SchedulerOptions options;
    options.slots = 2;
    options.context = 1024;
    smol::LoadOptions one_core;
    one_core.threads = 1;
    smol::Engine engine(smol_test::kTinyQuantizedModel, one_core);
    smol::Scheduler scheduler(engine, options);
    const smol::text::Tokenizer& tokenizer = scheduler.tokenizer();
    // 40 plain tokens: the end of generation is biased away, so every run is as long.
    constexpr int kPlainTokens = 40;
    smol::GenerationRequest plain = request_for(tokenizer.encode("Tell me a long story", true), kPlainTokens);
    for (const std::int32_t id : tokenizer.end_of_generation_ids()) plain.params.sampling.logit_bias.push_back({id, -100.0f});

    // Two pieces of up to 300 printable characters each: every step's vocabulary walk visits a
    // state never seen before (no cache helps) and costs most of the per-token budget. In
    // lockstep it would reach 41 of its 60 tokens while the plain stream takes its 40.
    smol::GenerationRequest costly = request_for(tokenizer.encode("Hi", true), 60);
    costly.params.grammar = std::make_shared<const smol::TokenGrammar>(
        smol::text::Grammar::parse("root ::= (s s)\ns ::= [ -~]{0,300}\n"), std::make_shared<const smol::TokenTrie>(tokenizer));
    const auto grammar_stream = scheduler.submit(costly);
    std::optional<smol::StreamEvent> first;
    while (!(first = grammar_stream->next(std::chrono::milliseconds(1000)))) {
    }
    REQUIRE_FALSE(first->finished);  // generating: its steps are the costly ones
    const std::uint64_t generated_before = scheduler.stats().generated_tokens;
    const smol::StreamEvent plain_end = scheduler.submit(plain)->collect();
    const std::uint64_t generated_during = scheduler.stats().generated_tokens - generated_before;
    REQUIRE(plain_end.usage.completion_tokens == kPlainTokens);
    CHECK(scheduler.stats().active_slots >= 1);  // the grammar still generating when the plain stream ended
    const std::uint64_t grammar_during = generated_during - kPlainTokens;
    const smol::StreamEvent grammar_end = grammar_stream->collect();
    MESSAGE("grammar tokens while the plain stream took its ", kPlainTokens, ": ", grammar_during, " (",
            grammar_end.usage.completion_tokens, " in all, finished: ", smol::to_string(grammar_end.finish), ")");
    CHECK(grammar_during * 2 <= std::uint64_t(kPlainTokens));
}

TEST_CASE("a cancelled request stops within a token and frees its slot") {
    smol::SchedulerOptions options;
    options.slots = 1;
    options.context = 512;
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const auto prompt = scheduler.tokenizer().encode("Tell me a long story", true);
    auto stream = scheduler.submit(request_for(prompt, 400));
    std::optional<smol::StreamEvent> e;
    while (!(e = stream->next(std::chrono::milliseconds(1000)))) {
    }
    REQUIRE(!e->finished);
    stream->cancel();
    const auto until_end = stream->collect();
    CHECK(until_end.finish == smol::FinishReason::cancelled);
    CHECK(until_end.usage.completion_tokens < 400);
    CHECK(scheduler.stats().active_slots == 0);
    CHECK(scheduler.stats().requests_cancelled == 1);

    // The slot serves the next request.
    const auto next = scheduler.submit(request_for(prompt, 3))->collect();
    CHECK(next.finish == smol::FinishReason::max_tokens);
    CHECK(next.usage.completion_tokens == 3);
}

TEST_CASE("with no queue a request runs when a slot is free, is refused while none is, and a named busy slot refuses") {
    smol::SchedulerOptions options = slot_options(2, 2048);
    options.max_queue = 0;
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const auto prompt = scheduler.tokenizer().encode("Tell me a long story", true);
    const auto endless = [&](int slot) {
        smol::GenerationRequest request = request_for(prompt, 2000);
        // No end-of-generation token can be picked, so each holds its slot until cancelled.
        for (const std::int32_t id : scheduler.tokenizer().end_of_generation_ids())
            request.params.sampling.logit_bias.emplace_back(id, -1e30f);
        request.slot = slot;
        return request;
    };
    // A limit of 0 once refused every request, since a request sits in the queue until the
    // loop gives it a free slot.
    auto first = scheduler.submit(endless(0));
    wait_for_active_slots(scheduler, 1);
    CHECK_THROWS_AS(scheduler.submit(endless(0)), smol::QueueFullError);  // its slot is busy, another free
    auto second = scheduler.submit(endless(-1));                           // the free one takes it
    wait_for_active_slots(scheduler, 2);
    CHECK_THROWS_AS(scheduler.submit(request_for(prompt, 2)), smol::QueueFullError);
    CHECK(scheduler.stats().requests_rejected == 2);
    first->cancel();
    second->cancel();
    CHECK(first->collect().finish == smol::FinishReason::cancelled);
    CHECK(second->collect().finish == smol::FinishReason::cancelled);
    CHECK(scheduler.submit(request_for(prompt, 2))->collect().usage.completion_tokens == 2);
}

TEST_CASE("a full queue and a prompt longer than the context are refused without queueing") {
    smol::SchedulerOptions options;
    options.slots = 1;
    options.context = 64;
    options.max_queue = 1;
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();

    std::vector<std::int32_t> long_prompt(64, tokenizer.encode("a", false).front());
    CHECK_THROWS_AS(scheduler.submit(request_for(long_prompt, 4)), smol::PromptTooLongError);
    long_prompt.resize(63);
    auto fits = scheduler.submit(request_for(long_prompt, 4))->collect();
    // One free position: the first new token fills it, the second ends generation.
    CHECK(fits.finish == smol::FinishReason::context_full);
    CHECK(fits.usage.completion_tokens == 2);

    const auto prompt = tokenizer.encode("Hello", true);
    auto running = scheduler.submit(request_for(prompt, 40));
    // Wait until the first request holds the slot, so the next one waits in the queue.
    wait_for_active_slots(scheduler, 1);
    auto waiting = scheduler.submit(request_for(prompt, 2));
    CHECK_THROWS_AS(scheduler.submit(request_for(prompt, 2)), smol::QueueFullError);
    CHECK(running->collect().finish == smol::FinishReason::max_tokens);
    CHECK(waiting->collect().usage.completion_tokens == 2);
    CHECK(scheduler.stats().requests_rejected == 2);

    smol::GenerationRequest bad = request_for(prompt, 2);
    bad.params.sampling.top_p = 0.0f;
    CHECK_THROWS_AS(scheduler.submit(bad), smol::Error);
    bad = request_for({100000}, 2);
    CHECK_THROWS_AS(scheduler.submit(bad), smol::Error);
}

TEST_CASE("idle caches are freed under the memory budget, least recently used first") {
    smol::SchedulerOptions options;
    options.slots = 3;
    options.context = 64;
    smol::Scheduler probe(smol_test::quantized_engine(), options);
    options.cache_budget_bytes = probe.cache_bytes_per_slot() * 2;  // two of the three slots
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const auto& tokenizer = scheduler.tokenizer();
    const auto a = tokenizer.encode("first conversation", true);
    const auto b = tokenizer.encode("second talk", true);
    const auto c = tokenizer.encode("third chat", true);
    scheduler.submit(request_for(a, 2))->collect();
    scheduler.submit(request_for(b, 2))->collect();
    CHECK(scheduler.stats().cache_bytes == 2 * scheduler.cache_bytes_per_slot());
    scheduler.submit(request_for(c, 2))->collect();  // evicts a's cache, the oldest
    CHECK(scheduler.stats().cache_bytes == 2 * scheduler.cache_bytes_per_slot());
    // b is still cached, a is not.
    auto b_again = scheduler.submit(request_for(b, 2))->collect();
    CHECK(b_again.usage.cached_tokens == int(b.size()) - 1);
    auto a_again = scheduler.submit(request_for(a, 2))->collect();
    CHECK(a_again.usage.cached_tokens == 0);
}

TEST_CASE("a chat session and the scheduler give the same reply: one pipeline, one penalty rule") {
    smol::Engine& engine = smol_test::float_engine();
    smol::ChatOptions chat;
    chat.date = "21 November 2026";
    smol::GenerationParams params;
    params.sampling.temperature = 0.9f;
    params.sampling.seed = 42;
    params.sampling.repeat_penalty = 1.3f;
    params.sampling.frequency_penalty = 0.5f;
    params.sampling.presence_penalty = 0.4f;
    params.max_tokens = 24;
    for (bool thinking : {true, false}) {
        CAPTURE(thinking);
        chat.enable_thinking = thinking;
        const nlohmann::ordered_json messages =
            nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Say it again and again: again"}}});
        smol::ChatSession session(engine, 512);  // the thinking-mode system prompt is long
        session.set_template_options(chat);
        const smol::GenerationResult alone = session.complete(messages, params);

        const smol::ChatPrompt prompt = smol::render_chat(messages, chat);
        smol::GenerationRequest request;
        request.prompt = engine.tokenizer().encode(prompt.text, true);
        request.assistant_prefix = prompt.assistant_prefix;
        request.params = params;
        smol::SchedulerOptions options;
        options.slots = 2;
        options.context = 512;
        smol::Scheduler scheduler(engine, options);
        const smol::StreamEvent served = scheduler.submit(request)->collect();
        CHECK(served.reasoning == alone.reasoning);
        CHECK(served.content == alone.answer);
        CHECK(served.finish == alone.finish_reason);
        CHECK(served.usage.prompt_tokens == alone.usage.prompt_tokens);
        CHECK(served.usage.completion_tokens == alone.usage.completion_tokens);
    }

    // The scheduler seeds the penalties with the prompt too: a prompt of sixty <|im_end|> and a
    // strongly negative frequency penalty make that end token the first choice.
    const std::int32_t end = *engine.tokenizer().find("<|im_end|>");
    smol::GenerationRequest pushed = request_for(std::vector<std::int32_t>(60, end), 8);
    pushed.params.sampling.frequency_penalty = -100.0f;
    smol::Scheduler scheduler(engine, {});
    const smol::StreamEvent ended = scheduler.submit(pushed)->collect();
    CHECK(ended.finish == smol::FinishReason::end_of_generation);
    CHECK(ended.usage.completion_tokens == 1);
    CHECK(ended.content == "");
}

TEST_CASE("a request runs in the slot it names; slot caches are copied, restored and erased only while idle") {
    smol::SchedulerOptions options;
    options.slots = 2;
    options.context = 256;
    smol::Scheduler scheduler(smol_test::quantized_engine(), options);
    const auto prompt = scheduler.tokenizer().encode("Tell me a long story about a lighthouse", true);
    smol::GenerationRequest pinned = request_for(prompt, 3);
    pinned.slot = 1;
    const smol::StreamEvent first = scheduler.submit(pinned)->collect();
    CHECK(first.slot == 1);  // the last event names the slot that ran it
    CHECK(scheduler.cached_tokens()[0].empty());
    CHECK(scheduler.cached_tokens()[1].size() >= prompt.size());
    pinned.slot = 2;
    CHECK_THROWS_WITH_AS(scheduler.submit(pinned), doctest::Contains("expected -1 (any) or 0 to 1"), smol::Error);

    // Slot 1's cache copied into slot 0: the same request there reuses all but its last token
    // and gives the same reply.
    smol::Scheduler::SlotCopy copy = scheduler.copy_slot(1);
    REQUIRE(copy.cache.has_value());
    CHECK(copy.tokens == scheduler.cached_tokens()[1]);
    scheduler.restore_slot(0, std::move(*copy.cache), copy.tokens, copy.partition);
    CHECK(scheduler.cached_tokens()[0] == scheduler.cached_tokens()[1]);
    pinned.slot = 0;
    const smol::StreamEvent again = scheduler.submit(pinned)->collect();
    CHECK(again.slot == 0);
    CHECK(again.usage.cached_tokens == int(prompt.size()) - 1);
    CHECK(again.content == first.content);
    CHECK(again.reasoning == first.reasoning);
    CHECK(scheduler.erase_slot(0) > 0);
    CHECK(scheduler.cached_tokens()[0].empty());
    CHECK_THROWS_AS(scheduler.erase_slot(2), smol::Error);

    // While a slot serves a request it is neither copied, restored nor erased. The request
    // cannot end by itself before it is cancelled: no end-of-generation token, thousands of
    // positions to fill.
    options.slots = 1;
    options.context = 4096;
    smol::Scheduler single(smol_test::quantized_engine(), options);
    smol::GenerationRequest endless = request_for(prompt, -1);
    for (const std::int32_t id : single.tokenizer().end_of_generation_ids())
        endless.params.sampling.logit_bias.emplace_back(id, -1e30f);
    auto running = single.submit(endless);
    while (single.stats().active_slots == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK_THROWS_AS(single.copy_slot(0), smol::SlotBusyError);
    CHECK_THROWS_AS(single.erase_slot(0), smol::SlotBusyError);
    CHECK_THROWS_AS(single.restore_slot(0, single.make_slot_cache(), {}, ""), smol::SlotBusyError);
    running->cancel();
    CHECK(running->collect().finish == smol::FinishReason::cancelled);
}

}  // namespace test_scheduler
