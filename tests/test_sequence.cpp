// smol::Sequence, the one driver under the chat session, the server's scheduler and smol-bench,
// on the tiny fixture models: the prompt-length rule, prefix reuse (hit, partial, miss, and the
// last prompt token run again), the room check, the reset after an error, the order its calls
// must come in, and feed/step giving bit for bit the logits and tokens of the loop the session
// ran before (forward, sample through the pipeline, push, forward), alone and batched.

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "float_bits.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/sequence.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_sequence {

using smol::Engine;
using smol::GenerationParams;
using smol::GenerationPipeline;
using smol::Sequence;
using smol::TextDelta;

namespace {

using smol_test::float_engine;
using smol_test::quantized_engine;

std::vector<std::int32_t> encode(const Engine& engine, const std::string& text) {
    return engine.tokenizer().encode(text, /*parse_special=*/true);
}

GenerationParams params_for(float temperature, int max_tokens) {
    GenerationParams p;
    p.sampling.temperature = temperature;
    p.sampling.seed = 42;
    p.max_tokens = max_tokens;
    return p;
}

using smol_test::same_bits;

// What one generation produced: the tokens picked, the logits each was picked from (as the
// model gave them), the text shown, and how it ended.
struct Run {
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<float>> logits;
    TextDelta text;
    smol::FinishReason finish = smol::FinishReason::end_of_generation;
};

// The generation loop as ChatSession::generate ran it before Sequence existed, written out on
// a bare KV cache: the reference feed/step must reproduce bit for bit.
Run loop_before_sequence(Engine& engine, int context, const std::vector<std::int32_t>& prompt,
                         const GenerationParams& params) {
    smol::KvCache cache = engine.make_cache(context);
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    GenerationPipeline pipeline(engine.tokenizer(), params, prompt, "");
    pipeline.begin_prompt(0);
    engine.forward(cache, prompt, logits.data(), false);
    Run run;
    while (true) {
        run.logits.push_back(logits);
        const std::int32_t id = pipeline.sample(logits, long(cache.capacity()) - long(cache.size()));
        run.tokens.push_back(id);
        TextDelta delta;
        const bool ended = pipeline.push(id, cache.size() < cache.capacity(), delta);
        run.text.append(delta);
        if (ended) break;
        engine.forward(cache, std::span<const std::int32_t>(&id, 1), logits.data(), false);
    }
    pipeline.finish(pipeline.finish_reason(), run.text);
    run.finish = pipeline.finish_reason();
    return run;
}

// The same generation through a Sequence run alone (the session's and smol-bench's way).
Run sequence_alone(Engine& engine, Sequence& sequence, const std::vector<std::int32_t>& prompt,
                   const GenerationParams& params, std::size_t chunk = Sequence::kWholePrompt) {
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    GenerationPipeline pipeline(engine.tokenizer(), params, prompt, "");
    sequence.start(prompt, &pipeline);
    while (sequence.reading_prompt()) sequence.feed(engine, logits, chunk);
    Run run;
    while (true) {
        run.logits.push_back(logits);
        TextDelta delta;
        const bool ended = sequence.step(logits, delta);
        run.tokens.push_back(sequence.picked());
        run.text.append(delta);
        if (ended) break;
        sequence.feed(engine, logits);
    }
    sequence.end();
    pipeline.finish(pipeline.finish_reason(), run.text);
    run.finish = pipeline.finish_reason();
    return run;
}

void check_same(const Run& got, const Run& expected) {
    CHECK(got.tokens == expected.tokens);
    CHECK(got.text.content == expected.text.content);
    CHECK(got.text.reasoning == expected.text.reasoning);
    CHECK(got.finish == expected.finish);
    REQUIRE(got.logits.size() == expected.logits.size());
    for (std::size_t i = 0; i < got.logits.size(); ++i) {
        CAPTURE(i);
        CHECK(same_bits(got.logits[i], expected.logits[i]));
    }
}

}  // namespace

TEST_CASE("sequence: the prompt-length rule leaves one position to generate, and says so") {
    CHECK(smol::prompt_fits(0, 4));
    CHECK(smol::prompt_fits(3, 4));
    CHECK_FALSE(smol::prompt_fits(4, 4));
    CHECK_FALSE(smol::prompt_fits(5, 4));
    CHECK_FALSE(smol::prompt_fits(0, 0));
    CHECK_NOTHROW(smol::check_prompt_fits(3, 4));
    CHECK_THROWS_AS(smol::check_prompt_fits(4, 4), smol::PromptTooLongError);
    const std::string message = smol::prompt_too_long_message(9, 4);
    CHECK(message.find("the prompt is 9 tokens") != std::string::npos);      // found
    CHECK(message.find("the context holds 4 tokens") != std::string::npos);  // where
    CHECK(message.find("expected at most 3") != std::string::npos);          // expected
}

TEST_CASE("sequence: feed and step give the logits and tokens of the loop before it, bit for bit") {
    for (Engine* engine : {&quantized_engine(), &float_engine()}) {
        const auto prompt =
            encode(*engine, "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n");
        for (const float temperature : {0.0f, 0.8f}) {
            CAPTURE(temperature);
            const GenerationParams params = params_for(temperature, 20);
            const Run expected = loop_before_sequence(*engine, 256, prompt, params);
            REQUIRE(expected.tokens.size() > 1);
            Sequence sequence(engine->make_cache(256));
            check_same(sequence_alone(*engine, sequence, prompt, params), expected);
            // The cache holds the prompt and every picked token but the last (never run).
            std::vector<std::int32_t> held = prompt;
            held.insert(held.end(), expected.tokens.begin(), expected.tokens.end() - 1);
            CHECK(std::vector<std::int32_t>(sequence.tokens().begin(), sequence.tokens().end()) == held);
            CHECK(sequence.size() == int(held.size()));
        }
    }
}

TEST_CASE("sequence: batched through next_input and ran, two sequences give what each gives alone") {
    Engine& engine = float_engine();
    const std::vector<std::vector<std::int32_t>> prompts = {encode(engine, "The quick brown fox"),
                                                            encode(engine, "Once upon a time there was a")};
    const GenerationParams params = params_for(0.0f, 12);
    std::vector<Run> alone;
    for (const auto& prompt : prompts) {
        Sequence sequence(engine.make_cache(128));
        alone.push_back(sequence_alone(engine, sequence, prompt, params, 3));
    }

    // As the scheduler drives its slots: one forward pass for every sequence with something to run.
    std::vector<Sequence> sequences;
    std::vector<std::unique_ptr<GenerationPipeline>> pipelines;
    for (const auto& prompt : prompts) {
        sequences.emplace_back(engine.make_cache(128));
        pipelines.push_back(std::make_unique<GenerationPipeline>(engine.tokenizer(), params, prompt, ""));
    }
    for (std::size_t s = 0; s < sequences.size(); ++s) CHECK(sequences[s].start(prompts[s], pipelines[s].get()) == 0);
    std::vector<Run> batched(prompts.size());
    std::vector<bool> running(prompts.size(), true);
    const std::size_t n_vocab = std::size_t(engine.n_vocab());
    std::vector<float> logits;
    for (int pass = 0; pass < 100; ++pass) {
        std::vector<smol::SequenceBatch> batch;
        std::vector<std::size_t> owner;
        for (std::size_t s = 0; s < sequences.size(); ++s) {
            if (!running[s]) continue;
            batch.push_back(sequences[s].next_input(3));  // prompts in chunks of 3, mixed with decoding
            owner.push_back(s);
        }
        if (batch.empty()) break;
        logits.resize(batch.size() * n_vocab);
        engine.forward(batch, logits.data());
        for (std::size_t b = 0; b < batch.size(); ++b) {
            Sequence& sequence = sequences[owner[b]];
            sequence.ran(batch[b].tokens.size());
            if (!sequence.wants_step()) continue;
            const std::span<float> row = std::span<float>(logits).subspan(b * n_vocab, n_vocab);
            Run& run = batched[owner[b]];
            run.logits.emplace_back(row.begin(), row.end());
            TextDelta delta;
            const bool ended = sequence.step(row, delta);
            run.tokens.push_back(sequence.picked());
            run.text.append(delta);
            if (ended) {
                running[owner[b]] = false;
                sequence.end();
            }
        }
    }
    for (std::size_t s = 0; s < prompts.size(); ++s) {
        CAPTURE(s);
        pipelines[s]->finish(pipelines[s]->finish_reason(), batched[s].text);
        batched[s].finish = pipelines[s]->finish_reason();
        CHECK_FALSE(running[s]);
        CHECK(batched[s].tokens == alone[s].tokens);
        CHECK(batched[s].text.content == alone[s].text.content);
        CHECK(batched[s].finish == alone[s].finish);
    }
}

TEST_CASE("sequence: prefix reuse keeps what the prompt shares, less its last token") {
    Engine& engine = quantized_engine();
    Sequence sequence(engine.make_cache(128));
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    const auto first = encode(engine, "<|im_start|>user\nHello there, how are you?<|im_end|>\n");
    CHECK(sequence.shared_prefix(first) == 0);
    CHECK(sequence.start(first, nullptr) == 0);  // a miss: nothing cached
    sequence.feed(engine, logits);
    CHECK(sequence.size() == int(first.size()));
    const std::vector<float> first_logits = logits;

    // A hit: the continued conversation keeps all of the first prompt and runs only the rest.
    auto longer = first;
    const auto more = encode(engine, "<|im_start|>assistant\nFine.<|im_end|>\n");
    longer.insert(longer.end(), more.begin(), more.end());
    CHECK(sequence.shared_prefix(longer) == first.size());
    CHECK(sequence.start(longer, nullptr) == first.size());
    CHECK(sequence.reading_prompt());
    CHECK(sequence.size() == int(first.size()));
    sequence.feed(engine, logits);
    CHECK(std::vector<std::int32_t>(sequence.tokens().begin(), sequence.tokens().end()) == longer);

    // The same prompt again: its last token runs again, since its logits pick the first new token,
    // and they are the logits it had the first time.
    CHECK(sequence.start(first, nullptr) == first.size() - 1);
    CHECK(sequence.size() == int(first.size()) - 1);
    sequence.feed(engine, logits);
    CHECK(sequence.size() == int(first.size()));
    CHECK(same_bits(logits, first_logits));

    // A partial hit: a prompt that leaves the cached one part way keeps the shared part.
    auto edited = first;
    edited.resize(first.size() / 2);
    const auto other = encode(engine, "Goodbye");
    edited.insert(edited.end(), other.begin(), other.end());
    const std::size_t shared = sequence.shared_prefix(edited);
    CHECK(shared >= first.size() / 2);
    CHECK(shared < edited.size());
    CHECK(sequence.start(edited, nullptr) == shared);
    sequence.feed(engine, logits);
    CHECK(std::vector<std::int32_t>(sequence.tokens().begin(), sequence.tokens().end()) == edited);

    // A miss: a different first token keeps nothing.
    const auto unrelated = encode(engine, "Goodbye, and thanks for the fish");
    REQUIRE(unrelated.front() != edited.front());
    CHECK(sequence.start(unrelated, nullptr) == 0);
    CHECK(sequence.size() == 0);

    // truncate() cuts back to a shared start, as smol-bench goes back to its depth.
    sequence.feed(engine, logits);
    sequence.truncate(3);
    CHECK(sequence.size() == 3);
    CHECK(std::vector<std::int32_t>(sequence.tokens().begin(), sequence.tokens().end()) ==
          std::vector<std::int32_t>(unrelated.begin(), unrelated.begin() + 3));
    CHECK_THROWS_AS(sequence.truncate(4), smol::Error);
}

TEST_CASE("sequence: a prompt too long for the context is refused before anything changes") {
    Engine& engine = quantized_engine();
    Sequence sequence(engine.make_cache(16));
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    const auto start = encode(engine, "Hello there");
    sequence.start(start, nullptr);
    sequence.feed(engine, logits);
    const std::vector<std::int32_t> before(sequence.tokens().begin(), sequence.tokens().end());

    std::vector<std::int32_t> too_long = start;
    too_long.resize(16, too_long.back());  // exactly the context: no position left to generate into
    try {
        sequence.start(too_long, nullptr);
        FAIL("expected PromptTooLongError for a prompt of 16 tokens in a context of 16");
    } catch (const smol::PromptTooLongError& e) {
        CHECK(std::string(e.what()) == smol::prompt_too_long_message(16, 16));
    }
    CHECK(std::vector<std::int32_t>(sequence.tokens().begin(), sequence.tokens().end()) == before);
    too_long.resize(15);  // one position left: it fits
    CHECK(sequence.start(too_long, nullptr) == start.size());
    sequence.feed(engine, logits);
    CHECK(sequence.size() == 15);

    CHECK_THROWS_AS(sequence.start(std::vector<std::int32_t>{}, nullptr), smol::Error);  // nothing to continue
    Sequence no_cache;
    CHECK_FALSE(no_cache.has_cache());
    CHECK(no_cache.capacity() == 0);
    CHECK_THROWS_AS(no_cache.start(start, nullptr), smol::Error);
}

TEST_CASE("sequence: after an error, reset forgets the cache and the next generation starts clean") {
    Engine& engine = float_engine();
    const auto prompt = encode(engine, "<|im_start|>user\nCount to ten.<|im_end|>\n<|im_start|>assistant\n");
    const GenerationParams params = params_for(0.0f, 10);
    Sequence fresh(engine.make_cache(128));
    const Run expected = sequence_alone(engine, fresh, prompt, params);

    Sequence sequence(engine.make_cache(128));
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    GenerationPipeline pipeline(engine.tokenizer(), params, prompt, "");
    sequence.start(prompt, &pipeline);
    sequence.feed(engine, logits);
    // The sampler refuses logits of the wrong size: the generation fails part way.
    TextDelta delta;
    CHECK_THROWS_AS(sequence.step(std::span<float>(logits).first(7), delta), smol::Error);
    sequence.reset();
    CHECK(sequence.size() == 0);
    CHECK(sequence.tokens().empty());
    CHECK_FALSE(sequence.reading_prompt());
    CHECK_FALSE(sequence.wants_step());
    CHECK_THROWS_AS(sequence.step(logits, delta), smol::Error);  // the failed generation is gone

    // Nothing is reused after the reset, and the next generation is what a fresh sequence gives.
    CHECK(sequence.shared_prefix(prompt) == 0);
    check_same(sequence_alone(engine, sequence, prompt, params), expected);
}

TEST_CASE("sequence: calls out of order are errors that say what was expected") {
    Engine& engine = quantized_engine();
    Sequence sequence(engine.make_cache(64));
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    const auto prompt = encode(engine, "Hello there, friend");
    REQUIRE(prompt.size() > 2);
    GenerationPipeline pipeline(engine.tokenizer(), params_for(0.0f, 4), prompt, "");
    sequence.start(prompt, &pipeline);
    TextDelta delta;
    // step() before the prompt's last token has run.
    try {
        sequence.step(logits, delta);
        FAIL("expected an error for step() while the prompt is being read");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()).find("the prompt still being read") != std::string::npos);
    }
    CHECK_THROWS_AS(sequence.next_input(0), smol::Error);
    const smol::SequenceBatch part = sequence.next_input(2);
    CHECK(part.tokens.size() == 2);
    CHECK(part.cache != nullptr);
    // ran() for more tokens than the prompt has left.
    try {
        sequence.ran(prompt.size() + 1);
        FAIL("expected an error for ran() past the prompt");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()).find("expected 1 to " + std::to_string(prompt.size())) != std::string::npos);
    }
    // ran() for tokens the model did not run: the cache and the record would disagree.
    CHECK_THROWS_AS(sequence.ran(2), smol::Error);
    sequence.reset();

    sequence.start(prompt, &pipeline);
    sequence.feed(engine, logits);
    CHECK(sequence.wants_step());
    CHECK_FALSE(sequence.step(logits, delta));
    CHECK_FALSE(sequence.wants_step());
    CHECK_THROWS_AS(sequence.step(logits, delta), smol::Error);  // the picked token has not run yet
    const smol::SequenceBatch next = sequence.next_input(100);
    REQUIRE(next.tokens.size() == 1);
    CHECK(next.tokens[0] == sequence.picked());
    CHECK_THROWS_AS(sequence.feed(engine, std::span<float>(logits).first(3)), smol::Error);
    sequence.end();
    CHECK_THROWS_AS(sequence.next_input(), smol::Error);  // the picked token went with the generation
    CHECK(sequence.size() == int(prompt.size()));          // the cache stays for reuse
}

TEST_CASE("sequence: a cache is attached, released and replaced") {
    Engine& engine = quantized_engine();
    Sequence sequence;
    sequence.set_cache(engine.make_cache(32));
    CHECK(sequence.has_cache());
    CHECK(sequence.capacity() == 32);
    std::vector<float> logits(std::size_t(engine.n_vocab()));
    const auto prompt = encode(engine, "Hello");
    sequence.start(prompt, nullptr);
    sequence.feed(engine, logits);
    CHECK(sequence.size() == int(prompt.size()));
    sequence.release_cache();
    CHECK_FALSE(sequence.has_cache());
    CHECK(sequence.size() == 0);
    sequence.set_cache(engine.make_cache(48));
    CHECK(sequence.capacity() == 48);
    CHECK(sequence.start(prompt, nullptr) == 0);
}

}  // namespace test_sequence
