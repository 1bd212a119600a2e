// Speculative decoding (generate/speculation.hpp, Sequence's verify step) on the tiny fixture
// models: prompt lookup's drafts, and the promise that speculation changes nothing. For many
// prompts (repetitive ones, so drafts are taken), seeds, temperatures, with and without a
// grammar, with log-probabilities and near a full context, the tokens, text, log-probabilities
// and finish reason with speculation equal those without, exactly; drafters that are always
// wrong, or right up to a mistake at every position, give the same text; afterwards the cache
// holds what plain decoding's holds (its tokens, and the bits of a following forward); the
// server's scheduler, whose slots draft within a shared row budget, gives the same streams; and
// a request's own speculative switch decides whether its slot drafts, whatever the default.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "float_bits.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/scheduler.hpp"
#include "smol/generate/sequence.hpp"
#include "smol/generate/session.hpp"
#include "smol/generate/speculation.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_speculation {

using smol::Engine;
using smol::GenerationParams;
using smol::GenerationPipeline;
using smol::Sequence;
using smol::SpeculationType;
using smol::TextDelta;

namespace {

using smol_test::float_engine;
using smol_test::quantized_engine;

std::vector<std::int32_t> lookup(const std::vector<std::int32_t>& context, std::size_t max_tokens) {
    std::vector<std::int32_t> draft;
    smol::draft_by_prompt_lookup(context, max_tokens, draft);
    return draft;
}

// (Empty spans may have no data pointer, which memcmp must not be given.)
using smol_test::same_bits;

// What one generation produced, and the state it left.
struct Run {
    std::vector<std::int32_t> tokens;  // every token picked
    TextDelta text;
    smol::FinishReason finish = smol::FinishReason::end_of_generation;
    smol::GenerationUsage usage;
    std::vector<std::int32_t> cached;  // what the cache held afterwards
    std::vector<float> next_logits;    // a forward of one more token on that cache
};

// One generation through a Sequence run alone (ChatSession's loop), with or without speculation.
Run generate(Engine& engine, int context, const std::vector<std::int32_t>& prompt, const GenerationParams& params,
             const smol::Drafter& drafter = {}) {
    const std::size_t n_vocab = std::size_t(engine.n_vocab());
    const int rows = params.speculation.enabled() ? 1 + params.speculation.draft_max : 1;
    std::vector<float> logits(n_vocab * std::size_t(rows));
    Sequence sequence(engine.make_cache(context));
    sequence.set_drafter(drafter);
    GenerationPipeline pipeline(engine.tokenizer(), params, prompt, "");
    sequence.start(prompt, &pipeline);
    while (sequence.reading_prompt()) sequence.feed(engine, logits, 5);  // chunks of 5
    Run run;
    while (true) {
        TextDelta delta;
        const bool ended = sequence.step(logits, delta);
        run.text.append(delta);
        if (ended) break;
        // Every cached position is one plain decoding would hold: prompt and picked tokens.
        CHECK(sequence.size() == int(prompt.size()) + pipeline.generated_tokens() - 1);
        sequence.feed(engine, logits);
    }
    sequence.end();
    pipeline.finish(pipeline.finish_reason(), run.text);
    run.finish = pipeline.finish_reason();
    run.usage = pipeline.usage();
    run.cached.assign(sequence.tokens().begin(), sequence.tokens().end());
    const std::size_t n_prompt = std::min(prompt.size(), run.cached.size());
    run.tokens.assign(run.cached.begin() + std::ptrdiff_t(n_prompt), run.cached.end());
    run.tokens.push_back(sequence.picked());
    // One more token on the cache as it was left: its logits show what the cache holds.
    if (sequence.size() + 1 < sequence.capacity()) {
        std::vector<std::int32_t> more = run.cached;
        more.push_back(7);
        sequence.start(more, nullptr);
        run.next_logits.resize(n_vocab);
        sequence.feed(engine, run.next_logits);
    }
    return run;
}

void check_same(const Run& got, const Run& expected) {
    CHECK(got.tokens == expected.tokens);
    CHECK(got.text.content == expected.text.content);
    CHECK(got.text.reasoning == expected.text.reasoning);
    CHECK(got.finish == expected.finish);
    CHECK(got.usage.completion_tokens == expected.usage.completion_tokens);
    REQUIRE(got.text.logprobs.size() == expected.text.logprobs.size());
    for (std::size_t i = 0; i < got.text.logprobs.size(); ++i) {
        const smol::TokenLogprob& a = got.text.logprobs[i];
        const smol::TokenLogprob& b = expected.text.logprobs[i];
        CHECK(a.token == b.token);
        CHECK(std::memcmp(&a.logprob, &b.logprob, sizeof(float)) == 0);
        REQUIRE(a.top.size() == b.top.size());
        for (std::size_t k = 0; k < a.top.size(); ++k) {
            CHECK(a.top[k].token == b.top[k].token);
            CHECK(std::memcmp(&a.top[k].logprob, &b.top[k].logprob, sizeof(float)) == 0);
        }
    }
    CHECK(got.cached == expected.cached);
    CHECK(same_bits(got.next_logits, expected.next_logits));
}

GenerationParams params_for(float temperature, std::uint64_t seed, int max_tokens) {
    GenerationParams p;
    p.sampling.temperature = temperature;
    p.sampling.seed = seed;
    p.max_tokens = max_tokens;
    p.split_reasoning = false;
    p.logprobs = 2;
    return p;
}

// Speculation as the tests run it: by default every step drafts all it can (adaptive off), the
// hardest case for the identity; adaptive: the draft lengths the costs and acceptance choose.
GenerationParams speculating(GenerationParams p, int draft_max = 8, int draft_min = 1, bool adaptive = false) {
    p.speculation.type = SpeculationType::ngram;
    p.speculation.draft_max = draft_max;
    p.speculation.draft_min = draft_min;
    p.speculation.adaptive = adaptive;
    return p;
}

std::vector<std::int32_t> encode(const Engine& engine, const std::string& text) {
    return engine.tokenizer().encode(text, /*parse_special=*/true);
}

const std::vector<std::string>& prompts() {
    static const std::vector<std::string> texts = {
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "one two three four one two three four one two three four one two three",
        "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(a, b):\n",
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
        "a a a a a a a a a a a a a a a a",
        "Once upon a time there was a",
        "{\"name\": \"smol\", \"size\": 3, \"name\": \"smol\", \"size\": 3, \"name\": \"smol\",",
    };
    return texts;
}

}  // namespace

TEST_CASE("prompt lookup drafts what followed the longest, most recent match of the context's tail") {
    // The tail "1 2" occurred twice; the most recent place wins: 9 followed it there.
    CHECK(lookup({1, 2, 5, 1, 2, 9, 7, 1, 2}, 3) == std::vector<std::int32_t>{9, 7, 1});
    // A longer match beats a more recent shorter one: "3 1 2" matched at the start.
    CHECK(lookup({3, 1, 2, 5, 6, 1, 2, 8, 3, 1, 2}, 2) == std::vector<std::int32_t>{5, 6});
    // A loop drafts past its period, copying its own draft.
    CHECK(lookup({4, 5, 4, 5}, 5) == std::vector<std::int32_t>{4, 5, 4, 5, 4});
    CHECK(lookup({7, 7, 7}, 4) == std::vector<std::int32_t>{7, 7, 7, 7});
    // At most max_tokens; none for a match shorter than kLookupMinMatch or no match at all.
    CHECK(lookup({1, 2, 3, 1, 2}, 1) == std::vector<std::int32_t>{3});
    CHECK(lookup({1, 2, 3, 1, 2}, 0).empty());
    CHECK(lookup({1, 2, 3, 4, 2}, 4).empty());  // "2" alone repeats by chance too often
    CHECK(lookup({1, 2, 3, 4, 5}, 4).empty());
    CHECK(lookup({1}, 4).empty());
    CHECK(lookup({}, 4).empty());
    // A match is at most kLookupMaxMatch long; among the longest the most recent is taken.
    std::vector<std::int32_t> long_repeat;
    for (std::int32_t i = 0; i < 3; ++i) {
        for (std::int32_t t = 1; t <= 10; ++t) long_repeat.push_back(t * 10);
        long_repeat.push_back(110 + i);
        long_repeat.push_back(120 + i);
    }
    long_repeat.push_back(999);
    for (std::int32_t t = 1; t <= 10; ++t) long_repeat.push_back(t * 10);
    CHECK(lookup(long_repeat, 2) == std::vector<std::int32_t>{112, 122});
}

TEST_CASE("the draft length is the one with the most tokens per unit of step cost") {
    const smol::StepCosts prior;  // nothing timed: the prior curve
    CHECK(prior.relative(1) == 1.0);
    CHECK(prior.relative(2) == doctest::Approx(1.15));
    CHECK(prior.relative(8) == doctest::Approx(3.7));
    CHECK(prior.relative(12) == doctest::Approx(6.0));
    // Every draft taken: the longest allowed pays best (17 tokens for 6 steps' cost).
    CHECK(smol::choose_draft_length(1.0, prior, 1, 16) == 16);
    // 90%: 1 + .9 + .81 + .73 = 3.44 tokens for 1.8 beats both 2 drafts (2.71 / 1.45) and 7
    // (5.7 / 3.7).
    CHECK(smol::choose_draft_length(0.9, prior, 1, 16) == 3);
    // 60%: one draft (1.6 for 1.15); two give 1.96 for 1.45.
    CHECK(smol::choose_draft_length(0.6, prior, 1, 16) == 1);
    // 10%: 1.1 tokens do not pay for 1.15: a plain step.
    CHECK(smol::choose_draft_length(0.1, prior, 1, 16) == 0);
    // draft_min and the limit bound the choice; a draft_min that does not pay gives none.
    CHECK(smol::choose_draft_length(1.0, prior, 1, 3) == 3);
    // (Every draft taken, 4-8 rows pay a little less per token than 4 do: 5 / 2.275 < 4 / 1.8.)
    CHECK(smol::choose_draft_length(1.0, prior, 1, 6) == 3);
    CHECK(smol::choose_draft_length(0.6, prior, 6, 16) == 0);
    CHECK(smol::choose_draft_length(0.9, prior, 0, 0) == 0);

    // Timed steps replace the prior: on a machine where 8 rows cost what 1 does, 90% drafts 7
    // (8-row steps), while rows past 8 keep the prior's 6.
    smol::StepCosts timed;
    timed.record(1, 0.10);
    timed.record(8, 0.10);
    CHECK(timed.relative(8) == doctest::Approx(1.0));
    CHECK(timed.relative(4) == doctest::Approx(1.8));  // not timed: the prior
    CHECK(smol::choose_draft_length(0.9, timed, 1, 16) == 7);
    // A running average: each new time counts a fifth; nonsense is ignored.
    timed.record(8, 0.20);
    CHECK(timed.relative(8) == doctest::Approx(1.2));
    timed.record(8, -1.0);
    timed.record(0, 1.0);
    timed.record(smol::StepCosts::kMaxRows + 1, 1.0);
    CHECK(timed.relative(8) == doctest::Approx(1.2));
}

TEST_CASE("draft acceptance: a geometric estimate that starts at one half and forgets slowly") {
    smol::DraftAcceptance a;
    CHECK(a.rate() == doctest::Approx(0.5));
    a.record(4, 4);  // every draft taken: 4 successes, no failure
    CHECK(a.rate() == doctest::Approx(5.0 / 6.0));
    a.reset();
    for (int i = 0; i < 50; ++i) a.record(4, 0);  // always rejected at once
    CHECK(a.rate() < 0.1);
    for (int i = 0; i < 50; ++i) a.fade();  // plain steps: back toward one half
    CHECK(a.rate() == doctest::Approx(0.5).epsilon(0.01));
    a.reset();
    for (int i = 0; i < 200; ++i) a.record(3, i % 5 == 0 ? 0 : 3);  // 12 taken of 4 steps' 13 tries
    CHECK(a.rate() == doctest::Approx(12.0 / 13.0).epsilon(0.05));
}

TEST_CASE("speculation parameters are checked, naming the value") {
    smol::SpeculationParams p;
    CHECK_NOTHROW(p.validate());
    p.draft_max = smol::SpeculationParams::kMaxDraft + 1;
    CHECK_THROWS_WITH(p.validate(), doctest::Contains("draft_max in [0, 64], found 65"));
    p.draft_max = 4;
    p.draft_min = 5;
    CHECK_THROWS_WITH(p.validate(), doctest::Contains("draft_min in [0, draft_max = 4], found 5"));
    CHECK(smol::parse_speculation_type("ngram") == SpeculationType::ngram);
    CHECK(smol::parse_speculation_type("none") == SpeculationType::none);
    CHECK_THROWS_WITH(smol::parse_speculation_type("eagle"), doctest::Contains("none or ngram, found 'eagle'"));
    // A pipeline refuses bad parameters before anything runs.
    GenerationParams bad;
    bad.speculation.draft_max = -1;
    const std::vector<std::int32_t> prompt = {1, 2};
    CHECK_THROWS_WITH(GenerationPipeline(smol_test::tiny_tokenizer(), bad, prompt, ""),
                      doctest::Contains("draft_max in [0, 64], found -1"));
}

TEST_CASE("speculation: tokens, text, log-probabilities and the cache equal plain decoding's, bit for bit") {
    struct Sampling {
        float temperature;
        std::uint64_t seed;
    };
    long drafted = 0, accepted = 0;
    for (Engine* engine : {&quantized_engine(), &float_engine()}) {
        const bool quantized = engine == &quantized_engine();
        // The float model for one sampled case; the quantized one for greedy and sampling.
        const std::vector<Sampling> samplings =
            quantized ? std::vector<Sampling>{{0.0f, 1}, {0.7f, 42}, {1.5f, 5}} : std::vector<Sampling>{{0.9f, 2}};
        for (const std::string& text : prompts()) {
            const auto prompt = encode(*engine, text);
            for (const Sampling& sampling : samplings) {
                // A roomy context, and one that fills part way (drafts cut to the room left).
                for (const int context : {256, int(prompt.size()) + 13}) {
                    if (!quantized && context != 256) continue;
                    CAPTURE(text);
                    CAPTURE(sampling.temperature);
                    CAPTURE(sampling.seed);
                    CAPTURE(context);
                    const GenerationParams plain = params_for(sampling.temperature, sampling.seed, 32);
                    const Run expected = generate(*engine, context, prompt, plain);
                    CHECK(expected.usage.drafted_tokens == 0);
                    for (const int draft_max : {1, 5, 16}) {
                        if (!quantized && draft_max == 1) continue;
                        if (context != 256 && draft_max == 5) continue;
                        CAPTURE(draft_max);
                        const Run got = generate(*engine, context, prompt, speculating(plain, draft_max));
                        check_same(got, expected);
                        CHECK(got.usage.accepted_tokens <= got.usage.drafted_tokens);
                        drafted += got.usage.drafted_tokens;
                        accepted += got.usage.accepted_tokens;
                    }
                    if (context == 256) {  // the draft lengths adaptive speculation chooses
                        const Run adaptive = generate(*engine, context, prompt, speculating(plain, 16, 1, true));
                        check_same(adaptive, expected);
                    }
                }
            }
        }
    }
    MESSAGE("prompt lookup on the tiny models: ", accepted, " of ", drafted, " drafted tokens accepted");
    CHECK(accepted > 0);  // the repetitive prompts do take drafts: the walk past row 0 is tested
    CHECK(accepted < drafted);  // and some are rejected: the rollback is tested
}

TEST_CASE("speculation: under a grammar, with penalties, stop strings and max_tokens, the same tokens") {
    Engine& engine = quantized_engine();
    const auto grammar = engine.compile_grammar(R"(root ::= ("ab" | "cd" | " " | "x")+ "." )");
    long accepted = 0;
    for (const std::string& text : prompts()) {
        const auto prompt = encode(engine, text);
        for (const float temperature : {0.0f, 0.9f}) {
            for (const int max_tokens : {1, 2, 7, 30}) {
                CAPTURE(text);
                CAPTURE(temperature);
                CAPTURE(max_tokens);
                if (max_tokens >= 7) {  // room for a sentence of the grammar
                    GenerationParams constrained = params_for(temperature, 7, max_tokens);
                    constrained.grammar = grammar;
                    const Run expected = generate(engine, 256, prompt, constrained);
                    const Run got = generate(engine, 256, prompt, speculating(constrained, 6));
                    check_same(got, expected);
                    accepted += got.usage.accepted_tokens;
                }

                GenerationParams penalised = params_for(temperature, 9, max_tokens);
                penalised.sampling.repeat_penalty = 1.3f;
                penalised.sampling.frequency_penalty = 0.2f;
                penalised.sampling.penalty_last_n = 8;
                penalised.stop = {"three", "b\n"};
                check_same(generate(engine, 256, prompt, speculating(penalised, 5)),
                           generate(engine, 256, prompt, penalised));
            }
        }
    }
    MESSAGE("under the grammar: ", accepted, " drafted tokens accepted");
}

TEST_CASE("speculation: drafts always wrong, or right up to a mistake anywhere, give the same text") {
    Engine& engine = quantized_engine();
    const std::int32_t n_vocab = engine.n_vocab();
    for (const std::string& text : prompts()) {
        const auto prompt = encode(engine, text);
        for (const float temperature : {0.0f, 0.8f}) {
            CAPTURE(text);
            CAPTURE(temperature);
            const GenerationParams plain = params_for(temperature, 3, 32);
            const Run expected = generate(engine, 256, prompt, plain);
            // The tokens plain decoding picks after `context`, the draft's context (prompt + picked).
            const auto truth = [&](std::span<const std::int32_t> context, std::size_t i) -> std::int32_t {
                const std::size_t at = context.size() - prompt.size() + i;
                return at < expected.tokens.size() ? expected.tokens[at] : 0;
            };

            const smol::Drafter always_wrong = [&](std::span<const std::int32_t> context, std::size_t max_tokens,
                                                   std::vector<std::int32_t>& draft) {
                for (std::size_t i = 0; i < max_tokens; ++i) draft.push_back((truth(context, i) + 1) % n_vocab);
            };
            const Run wrong = generate(engine, 256, prompt, speculating(plain, 4), always_wrong);
            check_same(wrong, expected);
            CHECK(wrong.usage.drafted_tokens > 0);
            CHECK(wrong.usage.accepted_tokens == 0);
            // Adaptive: drafts once, then backs off (1, 2, 4, 8, 16 plain steps) and its
            // acceptance estimate keeps them short: a fraction of what drafting every step sends.
            const Run adaptive = generate(engine, 256, prompt, speculating(plain, 4, 1, true), always_wrong);
            check_same(adaptive, expected);
            CHECK(adaptive.usage.drafted_tokens > 0);
            CHECK(adaptive.usage.drafted_tokens * 3 < wrong.usage.drafted_tokens);

            // Right for the first k tokens, k cycling 0..draft_max, then wrong: every row of the
            // walk is the one that stops it somewhere, and the rows after it are rolled back.
            std::size_t step = 0;
            const smol::Drafter mistaken = [&](std::span<const std::int32_t> context, std::size_t max_tokens,
                                               std::vector<std::int32_t>& draft) {
                const std::size_t right = step++ % 7;
                for (std::size_t i = 0; i < max_tokens; ++i)
                    draft.push_back(i < right ? truth(context, i) : (truth(context, i) + 1) % n_vocab);
            };
            const Run partly = generate(engine, 256, prompt, speculating(plain, 6), mistaken);
            check_same(partly, expected);
            CHECK(partly.usage.accepted_tokens > 0);
        }
    }
}

TEST_CASE("speculation through ChatSession: the same replies, drafts counted in the usage") {
    Engine& engine = quantized_engine();
    smol::ChatOptions options;
    options.date = "21 November 2026";
    options.enable_thinking = false;
    for (const float temperature : {0.0f, 0.8f}) {
        CAPTURE(temperature);
        smol::ChatSession plain(engine, 512), fast(engine, 512);
        plain.set_template_options(options);
        fast.set_template_options(options);
        GenerationParams params = params_for(temperature, 11, 48);
        params.split_reasoning = true;
        const GenerationParams with = speculating(params, 8);
        int drafted = 0;
        const std::vector<std::string> messages = {"Repeat: one two three four one two three four one two three four",
                                                   "And again, the same words please."};
        for (const std::string& message : messages) {
            const smol::GenerationResult a = plain.send(message, params);
            const smol::GenerationResult b = fast.send(message, with);
            CHECK(a.answer == b.answer);
            CHECK(a.reasoning == b.reasoning);
            CHECK(a.finish_reason == b.finish_reason);
            CHECK(a.usage.completion_tokens == b.usage.completion_tokens);
            CHECK(a.usage.drafted_tokens == 0);
            CHECK(b.usage.accepted_tokens <= b.usage.drafted_tokens);
            drafted += b.usage.drafted_tokens;
            // The second turn reuses the cache the first left: it must hold what plain's holds.
            CHECK(std::vector<std::int32_t>(plain.cached_tokens().begin(), plain.cached_tokens().end()) ==
                  std::vector<std::int32_t>(fast.cached_tokens().begin(), fast.cached_tokens().end()));
        }
        CHECK(drafted > 0);  // the session did speculate
    }
}

TEST_CASE("speculation under the scheduler's batching: the same streams, drafts within the row budget") {
    Engine& engine = quantized_engine();
    struct Case {
        std::string text;
        float temperature;
        std::uint64_t seed;
    };
    std::vector<Case> cases;
    for (const std::string& text : prompts())
        for (const float temperature : {0.0f, 0.8f}) cases.push_back({text, temperature, 5});
    // Alone (a Sequence, no speculation): what every stream must show.
    std::vector<Run> expected;
    for (const Case& c : cases)
        expected.push_back(generate(engine, 256, encode(engine, c.text), params_for(c.temperature, c.seed, 24)));

    for (const int slots : {1, 3, 8}) {
        CAPTURE(slots);
        smol::SchedulerOptions options;
        options.slots = slots;
        options.context = 256;
        options.prompt_chunk = 16;  // prompts read over several steps, beside verify steps
        options.speculation.type = SpeculationType::ngram;  // the server's --spec ngram: every request
        options.speculation.draft_max = 6;
        smol::Scheduler scheduler(engine, options);
        std::vector<std::shared_ptr<smol::GenerationStream>> streams;
        for (const Case& c : cases) {
            smol::GenerationRequest request;
            request.prompt = encode(engine, c.text);
            request.params = params_for(c.temperature, c.seed, 24);
            streams.push_back(scheduler.submit(std::move(request)));
        }
        int drafted = 0;
        for (std::size_t i = 0; i < streams.size(); ++i) {
            CAPTURE(cases[i].text);
            CAPTURE(cases[i].temperature);
            const smol::StreamEvent all = streams[i]->collect();
            CHECK(all.error == "");
            CHECK(all.content == expected[i].text.content);
            CHECK(all.finish == expected[i].finish);
            CHECK(all.usage.completion_tokens == expected[i].usage.completion_tokens);
            REQUIRE(all.logprobs.size() == expected[i].text.logprobs.size());
            for (std::size_t k = 0; k < all.logprobs.size(); ++k) {
                CHECK(all.logprobs[k].token == expected[i].text.logprobs[k].token);
                CHECK(std::memcmp(&all.logprobs[k].logprob, &expected[i].text.logprobs[k].logprob, sizeof(float)) == 0);
            }
            drafted += all.usage.drafted_tokens;
        }
        const smol::SchedulerStats stats = scheduler.stats();
        CHECK(stats.drafted_tokens == std::uint64_t(drafted));
        CHECK(stats.accepted_tokens <= stats.drafted_tokens);
        // One slot drafts up to 6 (its own token and 6 drafted: 7 of 8 rows); 8 busy slots fill
        // the 8 rows with their own tokens and draft nothing until some finish.
        if (slots == 1) CHECK(stats.accepted_tokens > 0);
        MESSAGE(slots, " slots: ", stats.accepted_tokens, " of ", stats.drafted_tokens, " drafted tokens accepted, ",
                stats.forward_calls, " forward passes for ", stats.generated_tokens, " tokens");
    }
}

TEST_CASE("a request's speculative switch overrides the scheduler's default: true drafts, false never does") {
    // What each switch resolves to, the options' draft lengths kept.
    smol::SpeculationParams server_default;  // --draft-max 5 --draft-min 2 without --spec
    server_default.draft_max = 5;
    server_default.draft_min = 2;
    smol::GenerationRequest request;
    CHECK_FALSE(smol::request_speculation(request, server_default).enabled());
    request.speculative = true;
    const smol::SpeculationParams on = smol::request_speculation(request, server_default);
    CHECK(on.type == SpeculationType::ngram);
    CHECK(on.draft_max == 5);
    CHECK(on.draft_min == 2);
    request.params = speculating(GenerationParams{}, 3);  // the library caller's own parameters win
    CHECK(smol::request_speculation(request, server_default).draft_max == 3);
    request.speculative = false;
    CHECK_FALSE(smol::request_speculation(request, server_default).enabled());
    server_default.type = SpeculationType::ngram;  // --spec ngram
    request.params = GenerationParams{};
    CHECK_FALSE(smol::request_speculation(request, server_default).enabled());
    request.speculative.reset();
    CHECK(smol::request_speculation(request, server_default).enabled());

    // Through the scheduler: every switch beside the others in one batch, each slot drafting by
    // its own request's, with the text of plain decoding (greedy and seeded sampling).
    Engine& engine = quantized_engine();
    struct Case {
        std::string text;
        float temperature;
    };
    std::vector<Case> cases;
    for (const std::string& text : prompts())
        for (const float temperature : {0.0f, 0.8f}) cases.push_back({text, temperature});
    std::vector<Run> expected;
    for (const Case& c : cases)
        expected.push_back(generate(engine, 256, encode(engine, c.text), params_for(c.temperature, 5, 24)));

    const std::optional<bool> switches[] = {std::nullopt, true, false};
    for (const bool spec_flag : {false, true}) {
        CAPTURE(spec_flag);
        smol::SchedulerOptions options;
        options.slots = 3;
        options.context = 256;
        options.max_queue = 64;  // every request queued at once
        options.speculation.type = spec_flag ? SpeculationType::ngram : SpeculationType::none;
        options.speculation.draft_max = 6;
        smol::Scheduler scheduler(engine, options);
        std::vector<std::shared_ptr<smol::GenerationStream>> streams;
        for (const Case& c : cases)
            for (const std::optional<bool>& speculative : switches) {
                smol::GenerationRequest r;
                r.prompt = encode(engine, c.text);
                r.params = params_for(c.temperature, 5, 24);
                r.speculative = speculative;
                streams.push_back(scheduler.submit(std::move(r)));
            }
        std::uint64_t drafted_by_switch[3] = {0, 0, 0}, drafted = 0;
        for (std::size_t i = 0; i < streams.size(); ++i) {
            const std::size_t case_index = i / 3, switch_index = i % 3;
            CAPTURE(cases[case_index].text);
            CAPTURE(cases[case_index].temperature);
            CAPTURE(switch_index);
            const smol::StreamEvent all = streams[i]->collect();
            CHECK(all.error == "");
            CHECK(all.content == expected[case_index].text.content);
            CHECK(all.finish == expected[case_index].finish);
            CHECK(all.usage.completion_tokens == expected[case_index].usage.completion_tokens);
            drafted_by_switch[switch_index] += std::uint64_t(all.usage.drafted_tokens);
            drafted += std::uint64_t(all.usage.drafted_tokens);
        }
        CHECK(scheduler.stats().drafted_tokens == drafted);
        CHECK(drafted_by_switch[1] > 0);   // true: drafts, with or without --spec
        CHECK(drafted_by_switch[2] == 0);  // false: none, even under --spec
        CHECK((drafted_by_switch[0] > 0) == spec_flag);  // unset: as --spec says
        MESSAGE("--spec ", std::string(spec_flag ? "ngram" : "none"), ": drafted unset ", drafted_by_switch[0], ", true ",
                drafted_by_switch[1], ", false ", drafted_by_switch[2]);
    }
}

}  // namespace test_speculation
