// The per-sequence generation pipeline alone, driven by scripted tokens: each step's logits
// are one-hot, so greedy sampling picks exactly the token the test wants and every stage
// (decoder, thinking split, stop strings, limits, usage, penalties) is checked on known text.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "smol/generate/pipeline.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/text/json_schema.hpp"
#include "smol/text/tokenizer.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_pipeline {

using smol::FinishReason;
using smol::GenerationParams;
using smol::GenerationPipeline;
using smol::TextDelta;

namespace {

const smol::text::Tokenizer& tokenizer() {
    static const smol::gguf::File file =
        smol::gguf::File::open(std::string(SMOL_TEST_DATA_DIR) + "/tiny-f32/smollm3-tiny-f32.gguf");
    static const smol::text::Tokenizer tok = smol::text::Tokenizer::from_gguf(file);
    return tok;
}

std::vector<std::int32_t> tokens(std::string_view text) { return tokenizer().encode(text, /*parse_special=*/true); }

std::int32_t end_of_turn() { return *tokenizer().find("<|im_end|>"); }

GenerationParams greedy(int max_tokens = -1) {
    GenerationParams p;
    p.sampling.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
}

// Logits that make greedy sampling pick `token`.
std::vector<float> one_hot(std::int32_t token) {
    std::vector<float> logits(tokenizer().n_vocab(), -10.0f);
    logits[std::size_t(token)] = 10.0f;
    return logits;
}

struct Run {
    TextDelta text;
    FinishReason reason = FinishReason::error;
    int steps = 0;  // tokens pushed before the pipeline ended (or all of them)
    bool ended = false;
};

// Feeds `script` token by token, the context holding room for `room` more tokens; finishes
// with `at_end` if the script runs out first.
Run drive(GenerationPipeline& pipeline, const std::vector<std::int32_t>& script, int room = 1 << 20,
          FinishReason at_end = FinishReason::max_tokens) {
    Run run;
    pipeline.begin_prompt(0);
    for (std::int32_t want : script) {
        std::vector<float> logits = one_hot(want);
        const std::int32_t got = pipeline.sample(logits);
        REQUIRE(got == want);
        ++run.steps;
        if (pipeline.push(got, run.steps < room, run.text)) {
            run.ended = true;
            break;
        }
    }
    if (!run.ended) pipeline.finish(at_end, run.text);
    run.reason = pipeline.finish_reason();
    return run;
}

}  // namespace

TEST_CASE("pipeline: think tags split reasoning from answer; stop strings look at the answer only") {
    const auto prompt = tokens("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    GenerationParams params = greedy();
    params.stop = {"STOP"};
    GenerationPipeline pipeline(tokenizer(), params, prompt, "");
    const Run run = drive(pipeline, tokens("<think>\nI could say STOP here.\n</think>\nThe answer. STOP and more"));
    CHECK(run.ended);
    CHECK(run.reason == FinishReason::stop_string);
    CHECK(run.text.reasoning == "I could say STOP here.\n");
    CHECK(run.text.content == "The answer. ");
    CHECK(pipeline.usage().completion_tokens == run.steps);
    CHECK(pipeline.usage().prompt_tokens == int(prompt.size()));
}

TEST_CASE("pipeline: the assistant prefix decides where generation starts") {
    const auto prompt = tokens("<|im_start|>assistant\n");
    SUBCASE("inside an open think block: reasoning until </think>") {
        GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "<think>\n");
        const Run run = drive(pipeline, tokens("still thinking</think>\nDone"));
        CHECK(run.text.reasoning == "still thinking");
        CHECK(run.text.content == "Done");
    }
    SUBCASE("after the empty no-think block: answer, leading whitespace dropped") {
        GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "<think>\n\n</think>\n");
        const Run run = drive(pipeline, tokens("\n  Hello"));
        CHECK(run.text.reasoning == "");
        CHECK(run.text.content == "Hello");
    }
    SUBCASE("a prefilled answer: generation continues it as answer") {
        GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "Sure, ");
        const Run run = drive(pipeline, tokens(" here it is"));
        CHECK(run.text.content == " here it is");
    }
}

TEST_CASE("pipeline: limits end generation with their reason, and held-back text is shown") {
    const auto prompt = tokens("Count:");
    SUBCASE("max_tokens") {
        GenerationParams params = greedy(3);
        params.stop = {"one two three four"};
        GenerationPipeline pipeline(tokenizer(), params, prompt, "");
        const std::vector<std::int32_t> script = tokens(" one two three four five");
        const Run run = drive(pipeline, script);
        CHECK(run.ended);
        CHECK(run.steps == 3);
        CHECK(run.reason == FinishReason::max_tokens);
        // The matcher held this back as a possible stop string; at the end it is the answer.
        const std::string first_three = tokenizer().decode(std::vector<std::int32_t>(script.begin(), script.begin() + 3));
        CHECK(first_three.starts_with(" one"));
        CHECK(run.text.content == first_three);
    }
    SUBCASE("a full context") {
        GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "");
        const Run run = drive(pipeline, tokens(" one two three four five"), /*room=*/2);
        CHECK(run.ended);
        CHECK(run.steps == 2);
        CHECK(run.reason == FinishReason::context_full);
    }
    SUBCASE("end of generation: the end token shows nothing") {
        GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "");
        std::vector<std::int32_t> script = tokens(" one");
        script.push_back(end_of_turn());
        script.push_back(tokens(" two").front());
        const Run run = drive(pipeline, script);
        CHECK(run.ended);
        CHECK(run.steps == 2);
        CHECK(run.reason == FinishReason::end_of_generation);
        CHECK(run.text.content == " one");
        CHECK(pipeline.usage().completion_tokens == 2);  // the end token counts as sampled
    }
    SUBCASE("cancelled keeps what was written; a failure drops what was held back") {
        GenerationParams params = greedy();
        params.stop = {" two three"};
        GenerationPipeline cancelled(tokenizer(), params, prompt, "");
        const Run kept = drive(cancelled, tokens(" one two"), 1 << 20, FinishReason::cancelled);
        CHECK(kept.reason == FinishReason::cancelled);
        CHECK(kept.text.content == " one two");
        GenerationPipeline failed(tokenizer(), params, prompt, "");
        const Run dropped = drive(failed, tokens(" one two"), 1 << 20, FinishReason::error);
        CHECK(dropped.reason == FinishReason::error);
        CHECK(dropped.text.content == " one");
    }
    SUBCASE("a stop string completed by the flushed tail still counts as a stop") {
        GenerationParams params = greedy();
        params.stop = {"<thi"};
        GenerationPipeline pipeline(tokenizer(), params, prompt, "");
        // The thinking parser holds "<thi" back as a possible <think> until the end, so the
        // stop strings first see it in the flush.
        const Run run = drive(pipeline, tokens("ok <thi"));
        CHECK_FALSE(run.ended);
        CHECK(run.reason == FinishReason::stop_string);
        CHECK(run.text.content == "ok ");
    }
}

TEST_CASE("pipeline: the repetition penalties see the prompt's tail (llama-server's rule)") {
    const std::int32_t repeated = tokens(" cat").front();
    const std::int32_t other = tokens(" dog").front();
    const std::vector<std::int32_t> prompt(10, repeated);
    // " dog" is slightly ahead; a strongly negative frequency penalty pulls " cat" above it,
    // but only if the penalty window holds the prompt's ten " cat"s.
    std::vector<float> logits(tokenizer().n_vocab(), -10.0f);
    logits[std::size_t(other)] = 1.0f;
    logits[std::size_t(repeated)] = 0.5f;
    GenerationParams params = greedy();
    params.sampling.frequency_penalty = -1.0f;
    params.sampling.penalty_last_n = 64;
    {
        GenerationPipeline pipeline(tokenizer(), params, prompt, "");
        pipeline.begin_prompt(0);
        std::vector<float> l = logits;
        CHECK(pipeline.sample(l) == repeated);
    }
    params.sampling.penalty_last_n = 0;  // penalties off
    {
        GenerationPipeline pipeline(tokenizer(), params, prompt, "");
        pipeline.begin_prompt(0);
        std::vector<float> l = logits;
        CHECK(pipeline.sample(l) == other);
    }
    // Only the last penalty_last_n prompt tokens count: a window of 4 over [cat x10, dog x4].
    std::vector<std::int32_t> ending_in_dogs = prompt;
    ending_in_dogs.insert(ending_in_dogs.end(), 4, other);
    params.sampling.penalty_last_n = 4;
    params.sampling.frequency_penalty = 1.0f;  // now a real penalty: the dogs in the window are pushed down
    {
        GenerationPipeline pipeline(tokenizer(), params, ending_in_dogs, "");
        pipeline.begin_prompt(0);
        std::vector<float> l = logits;
        CHECK(pipeline.sample(l) == repeated);
    }
}

TEST_CASE("pipeline: usage times and bad parameters") {
    const auto prompt = tokens("Hello there");
    GenerationPipeline pipeline(tokenizer(), greedy(), prompt, "");
    pipeline.begin_prompt(2);
    CHECK(pipeline.usage().cached_tokens == 2);
    CHECK(pipeline.usage().prompt_evaluated() == int(prompt.size()) - 2);
    TextDelta out;
    for (std::int32_t t : tokens(" a b c")) {
        std::vector<float> logits = one_hot(t);
        pipeline.push(pipeline.sample(logits), true, out);
    }
    pipeline.finish(FinishReason::max_tokens, out);
    const smol::GenerationUsage& u = pipeline.usage();
    CHECK(u.completion_tokens == 3);
    CHECK(u.queue_ms >= 0.0);
    CHECK(u.time_to_first_token_ms >= u.prompt_ms);
    CHECK(u.generation_ms >= 0.0);
    // A second finish changes nothing.
    pipeline.finish(FinishReason::cancelled, out);
    CHECK(pipeline.finish_reason() == FinishReason::max_tokens);

    GenerationParams bad = greedy();
    bad.stop = {""};
    CHECK_THROWS_AS(GenerationPipeline(tokenizer(), bad, prompt, ""), smol::Error);
    bad = greedy();
    bad.sampling.top_p = 0.0f;
    bad.sampling.temperature = 1.0f;
    CHECK_THROWS_AS(GenerationPipeline(tokenizer(), bad, prompt, ""), smol::Error);
    CHECK_THROWS_AS(GenerationPipeline(tokenizer(), greedy(), std::vector<std::int32_t>{}, ""), smol::Error);
}

TEST_CASE("pipeline: tool calls are parsed when asked for, and end the turn as tool_calls") {
    const auto prompt = tokens("<|im_start|>assistant\n");
    const std::string reply = "<think>\nweather?\n</think>\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", "
                              "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    std::vector<std::int32_t> script = tokens(reply);
    script.push_back(end_of_turn());
    GenerationParams params = greedy();
    params.stop = {"Paris"};  // inside the call: stop strings never see it
    params.parse_tool_calls = true;
    GenerationPipeline pipeline(tokenizer(), params, prompt, "");
    const Run run = drive(pipeline, script);
    CHECK(run.reason == FinishReason::tool_calls);
    CHECK(run.text.reasoning == "weather?\n");
    CHECK(run.text.content == "Checking.");
    REQUIRE(run.text.tool_calls.size() == 1);
    CHECK(run.text.tool_calls[0].name == "get_weather");
    CHECK(run.text.tool_calls[0].arguments == R"({"city":"Paris"})");

    // Off (no tools rendered), the same tokens are plain answer text and a stop string matches.
    params.parse_tool_calls = false;
    GenerationPipeline plain(tokenizer(), params, prompt, "");
    const Run text = drive(plain, script);
    CHECK(text.reason == FinishReason::stop_string);
    CHECK(text.text.tool_calls.empty());
    CHECK(text.text.content.find("<tool_call>") != std::string::npos);

    // A prefix that opened the call (a prefill) primes the parser: generation finishes the call.
    params.parse_tool_calls = true;
    params.stop.clear();
    GenerationPipeline continued(tokenizer(), params, prompt, "<tool_call>\n{\"name\": \"f\", ");
    std::vector<std::int32_t> rest = tokens("\"arguments\": {\"x\": 1}}\n</tool_call>");
    rest.push_back(end_of_turn());
    const Run finished = drive(continued, rest);
    CHECK(finished.reason == FinishReason::tool_calls);
    REQUIRE(finished.text.tool_calls.size() == 1);
    CHECK(finished.text.tool_calls[0].name == "f");
    CHECK(finished.text.content == "");
}

TEST_CASE("token_logprob is the log-softmax of the raw logits, with the most likely alternatives in order") {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(5000);
    for (float& x : logits) x = normal(rng);
    logits[10] = logits[20] = 20.0f;  // a tie for the top (the others are below 15): the lower id comes first
    logits[30] = std::numeric_limits<float>::quiet_NaN();
    double norm = 0.0;
    for (const float x : logits)
        if (!std::isnan(x)) norm += std::exp(double(x));
    const auto expected = [&](std::int32_t id) { return std::log(std::exp(double(logits[std::size_t(id)])) / norm); };

    const smol::TokenLogprob entry = smol::token_logprob(logits, 123, 5);
    CHECK(entry.token == 123);
    CHECK(entry.logprob == doctest::Approx(expected(123)).epsilon(1e-5));
    REQUIRE(entry.top.size() == 5);
    CHECK(entry.top[0].token == 10);
    CHECK(entry.top[1].token == 20);
    for (std::size_t i = 0; i < entry.top.size(); ++i) {
        CHECK(entry.top[i].logprob == doctest::Approx(expected(entry.top[i].token)).epsilon(1e-5));
        if (i > 0) CHECK(entry.top[i].logprob <= entry.top[i - 1].logprob);
    }
    std::vector<float> sorted;
    for (const float x : logits)
        if (!std::isnan(x)) sorted.push_back(x);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    CHECK(logits[std::size_t(entry.top[4].token)] == sorted[4]);
    CHECK(smol::token_logprob(logits, 30, 0).logprob == -std::numeric_limits<float>::infinity());
    CHECK(smol::token_logprob(logits, 30, 0).top.empty());
    CHECK_THROWS_AS(smol::token_logprob(logits, 5000, 1), smol::Error);
    CHECK_THROWS_AS(smol::token_logprob(logits, 0, smol::kMaxTopLogprobs + 1), smol::Error);
}

TEST_CASE("pipeline: with logprobs every generated token gets an entry from the logits before penalties") {
    const auto prompt = tokens("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    GenerationParams params = greedy();
    params.logprobs = 2;
    params.sampling.repeat_penalty = 1.5f;  // edits the logits the sampler sees, not the ones reported
    GenerationPipeline pipeline(tokenizer(), params, prompt, "");
    pipeline.begin_prompt(0);
    const auto script = tokens("Hello there");
    TextDelta text;
    for (const std::int32_t want : script) {
        std::vector<float> logits = one_hot(want);
        logits[std::size_t(prompt.back())] = 9.0f;  // the runner-up, before the penalty
        const std::vector<float> raw = logits;
        REQUIRE(pipeline.sample(logits) == want);
        TextDelta step;
        REQUIRE_FALSE(pipeline.push(want, true, step));
        REQUIRE(step.logprobs.size() == 1);
        const smol::TokenLogprob& entry = step.logprobs[0];
        CHECK(entry.token == want);
        const smol::TokenLogprob expected = smol::token_logprob(raw, want, 2);
        CHECK(entry.logprob == expected.logprob);
        REQUIRE(entry.top.size() == 2);
        CHECK(entry.top[0].token == want);
        CHECK(entry.top[1].token == prompt.back());
        CHECK(entry.top[1].logprob == expected.top[1].logprob);
        text.append(step);
    }
    // The end of generation gets none.
    std::vector<float> logits = one_hot(end_of_turn());
    REQUIRE(pipeline.sample(logits) == end_of_turn());
    TextDelta last;
    REQUIRE(pipeline.push(end_of_turn(), true, last));
    CHECK(last.logprobs.empty());
    CHECK(text.logprobs.size() == script.size());
    CHECK(text.content + last.content == "Hello there");

    GenerationParams too_many = greedy();
    too_many.logprobs = smol::kMaxTopLogprobs + 1;
    CHECK_THROWS_AS(GenerationPipeline(tokenizer(), too_many, prompt, ""), smol::Error);
}

TEST_CASE("pipeline: with token_ids every generated token's id is listed in its step, the end of generation not") {
    const auto prompt = tokens("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const auto script = tokens("Hello there");
    for (const bool listed : {false, true}) {
        CAPTURE(listed);
        GenerationParams params = greedy();
        params.token_ids = listed;
        GenerationPipeline pipeline(tokenizer(), params, prompt, "");
        pipeline.begin_prompt(0);
        TextDelta text;
        for (const std::int32_t want : script) {
            std::vector<float> logits = one_hot(want);
            REQUIRE(pipeline.sample(logits) == want);
            TextDelta step;
            REQUIRE_FALSE(pipeline.push(want, true, step));
            CHECK(step.tokens == (listed ? std::vector<std::int32_t>{want} : std::vector<std::int32_t>{}));
            CHECK(step.logprobs.empty());  // ids come without log-probabilities
            text.append(step);
        }
        std::vector<float> logits = one_hot(end_of_turn());
        REQUIRE(pipeline.sample(logits) == end_of_turn());
        TextDelta last;
        REQUIRE(pipeline.push(end_of_turn(), true, last));
        CHECK(last.tokens.empty());
        CHECK(text.tokens == (listed ? script : std::vector<std::int32_t>{}));
        CHECK(text.content + last.content == "Hello there");
    }
}

TEST_CASE("pipeline: without split_reasoning, think tags are text like any other (raw completions)") {
    const auto prompt = tokens("Once upon a time");
    GenerationParams params = greedy();
    params.split_reasoning = false;
    GenerationPipeline raw(tokenizer(), params, prompt, "");
    const Run run = drive(raw, tokens("<think>hm</think> there was"));
    CHECK(run.text.reasoning.empty());
    CHECK(run.text.content == "<think>hm</think> there was");

    GenerationPipeline split(tokenizer(), greedy(), prompt, "");
    const Run parsed = drive(split, tokens("<think>hm</think> there was"));
    CHECK(parsed.text.reasoning == "hm");
    CHECK(parsed.text.content != run.text.content);
}

namespace {

std::shared_ptr<const smol::TokenGrammar> token_grammar(std::string_view gbnf) {
    static const auto trie = std::make_shared<const smol::TokenTrie>(tokenizer());
    return std::make_shared<const smol::TokenGrammar>(smol::text::Grammar::parse(gbnf), trie);
}

// The prompt's end in no-think mode: the answer starts at once (a grammar holds all of it).
constexpr std::string_view kNoThinkPrefix = "<think>\n\n</think>\n";

// Samples from random logits (a model that knows nothing) under `params` until the pipeline
// ends; returns the text.
TextDelta random_model(GenerationParams params, std::uint32_t seed, long room = 1 << 20) {
    const auto prompt = tokens("<|im_start|>user\nJSON please<|im_end|>\n<|im_start|>assistant\n");
    GenerationPipeline pipeline(tokenizer(), params, prompt, kNoThinkPrefix);
    pipeline.begin_prompt(0);
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 4.0f);
    TextDelta text;
    for (int step = 0; step < 10000; ++step) {
        std::vector<float> logits(tokenizer().n_vocab());
        for (float& x : logits) x = noise(rng);
        const std::int32_t token = pipeline.sample(logits, room - step);
        if (pipeline.push(token, step + 1 < room, text)) return text;
    }
    FAIL("the pipeline never ended");
    return text;
}

}  // namespace

TEST_CASE("pipeline: a grammar makes even random logits write a complete JSON object within max_tokens") {
    const auto json_object = token_grammar(smol::text::kJsonObjectGrammar);  // shared: it caches what it learns
    for (const int max_tokens : {2, 3, 5, 8, 16, 40, 120}) {
        for (std::uint32_t seed = 1; seed <= 8; ++seed) {
            CAPTURE(max_tokens);
            CAPTURE(seed);
            GenerationParams params;
            params.sampling.temperature = 1.0f;
            params.sampling.seed = seed;
            params.max_tokens = max_tokens;
            params.grammar = json_object;
            const TextDelta text = random_model(params, seed);
            CAPTURE(text.content);
            CHECK(text.reasoning.empty());
            const auto parsed = nlohmann::json::parse(text.content, nullptr, false);
            CHECK(parsed.is_object());
        }
    }
    // Without the grammar the same random model writes no JSON.
    GenerationParams free_params;
    free_params.sampling.temperature = 1.0f;
    free_params.max_tokens = 40;
    CHECK_FALSE(nlohmann::json::accept(random_model(free_params, 1).content));
}

TEST_CASE("pipeline: the grammar also completes before the context runs out") {
    GenerationParams params;
    params.sampling.temperature = 1.0f;
    params.grammar = token_grammar("root ::= \"<\" [a-z]+ \">\"\n");
    const TextDelta text = random_model(params, 9, /*room=*/12);
    CAPTURE(text.content);
    REQUIRE(text.content.size() >= 3);
    CHECK(text.content.front() == '<');
    CHECK(text.content.back() == '>');
}

TEST_CASE("pipeline: constrained decoding's work per token stays far inside its budget for JSON") {
    // A long JSON reply from random logits, on a fresh grammar (nothing learnt yet): every
    // state's vocabulary walk is paid here. The budget (kGrammarStepBudget per token) must
    // leave real grammars room many times over, and the total stay modest.
    const auto fresh = token_grammar(smol::text::kJsonObjectGrammar);
    const auto prompt = tokens("<|im_start|>user\nJSON please<|im_end|>\n<|im_start|>assistant\n");
    GenerationParams params;
    params.sampling.temperature = 1.0f;
    params.sampling.seed = 3;
    params.max_tokens = 400;
    params.grammar = fresh;
    GenerationPipeline pipeline(tokenizer(), params, prompt, kNoThinkPrefix);
    pipeline.begin_prompt(0);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 4.0f);
    TextDelta text;
    int steps = 0;
    for (; steps < 1000; ++steps) {
        std::vector<float> logits(tokenizer().n_vocab());
        for (float& x : logits) x = noise(rng);
        if (pipeline.push(pipeline.sample(logits), true, text)) break;
    }
    const smol::GrammarConstraint& c = *pipeline.constraint();
    MESSAGE("JSON grammar over ", steps + 1, " tokens: work ", c.work_total(), " in all, at most ", c.work_max_step(),
            " in one step (budget ", smol::kGrammarStepBudget, " per step)");
    CHECK(nlohmann::json::parse(text.content, nullptr, false).is_object());
    CHECK(c.work_max_step() * 8 < smol::kGrammarStepBudget);

    // The costliest walk: inside a string, where nearly every token fits, over SmolLM3's real
    // vocabulary (128,256 tokens; the tiny model's has 4,096).
    static const smol::gguf::File vocab_file =
        smol::gguf::File::open(std::string(SMOL_TEST_DATA_DIR) + "/vocab/smollm3-vocab.gguf");
    static const smol::text::Tokenizer vocab = smol::text::Tokenizer::from_gguf(vocab_file);
    const auto real = std::make_shared<const smol::TokenGrammar>(smol::text::Grammar::parse(smol::text::kJsonObjectGrammar),
                                                                 std::make_shared<const smol::TokenTrie>(vocab));
    smol::GrammarConstraint in_string(real, vocab);
    for (const std::int32_t t : vocab.encode("{\"key\": \"va", false)) in_string.accept(t);
    std::vector<float> logits(vocab.n_vocab(), 0.0f);
    in_string.apply(logits, 100);
    MESSAGE("one walk inside a JSON string over ", vocab.n_vocab(), " tokens: ", in_string.work_max_step(), " units");
    CHECK(in_string.work_max_step() * 8 < smol::kGrammarStepBudget);
}

TEST_CASE("grammar constraint: a reply's matching has a total budget, and passing it ends the reply with the reason") {
    const smol::text::Tokenizer& vocab = tokenizer();
    // Each constraint gets a grammar of its own, so that no walk is answered from another's cache.
    const auto json_grammar = [&] {
        return std::make_shared<const smol::TokenGrammar>(smol::text::Grammar::parse(smol::text::kJsonObjectGrammar),
                                                          std::make_shared<const smol::TokenTrie>(vocab));
    };
    std::vector<float> logits(vocab.n_vocab(), 0.0f);
    smol::GrammarConstraint unbounded(json_grammar(), vocab);
    unbounded.apply(logits, 100);
    const std::uint64_t first_step = unbounded.work_total();
    REQUIRE(first_step > 0);
    // A budget the first step spends: the second step is refused before it starts.
    smol::GrammarConstraint bounded(json_grammar(), vocab, first_step);
    std::fill(logits.begin(), logits.end(), 0.0f);
    bounded.apply(logits, 100);
    CHECK_THROWS_WITH_AS(bounded.accept(vocab.encode("{", false).at(0)), doctest::Contains("total budget of"),
                         smol::text::GrammarTooComplex);
    CHECK(smol::kGrammarRequestBudget >= 16 * smol::kGrammarStepBudget);
}

// ---- reasoning budgets and grammars after reasoning or a trigger ------------------------------

namespace {

// One generation from random logits (seeded), token by token: what each step showed and which
// token it picked. `edit` may change a step's logits before sampling (forcing a token, say).
struct Steps {
    std::vector<std::int32_t> picked;
    std::vector<TextDelta> deltas;  // one per token; the last also holds what finish() showed
    TextDelta text;                 // all of them
    int thinking_tokens = 0;
    FinishReason reason = FinishReason::error;
};

Steps random_steps(const GenerationParams& params, std::string_view assistant_prefix, std::uint32_t seed,
                   const std::function<void(int step, std::vector<float>&)>& edit = {}) {
    const auto prompt = tokens("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    GenerationPipeline pipeline(tokenizer(), params, prompt, assistant_prefix);
    pipeline.begin_prompt(0);
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 4.0f);
    Steps out;
    for (int step = 0; step < 2000; ++step) {
        std::vector<float> logits(tokenizer().n_vocab());
        for (float& x : logits) x = noise(rng);
        if (edit) edit(step, logits);
        const std::int32_t token = pipeline.sample(logits);
        out.picked.push_back(token);
        TextDelta delta;
        const bool ended = pipeline.push(token, true, delta);
        out.deltas.push_back(delta);
        out.text.append(delta);
        if (ended) break;
    }
    REQUIRE(pipeline.finished());
    out.thinking_tokens = pipeline.thinking_tokens();
    out.reason = pipeline.finish_reason();
    return out;
}

// Keeps the model from ending the reply or closing its think block itself.
void never_ends_or_closes(int, std::vector<float>& logits) {
    for (std::int32_t id : tokenizer().end_of_generation_ids()) logits[std::size_t(id)] = -1e9f;
    logits[std::size_t(*tokenizer().find("</think>"))] = -1e9f;
}

// Whether every delta before the first shown answer text holds no answer, and none after it
// holds reasoning: a stream splits the two channels in order.
bool reasoning_then_content(const Steps& steps) {
    bool answered = false;
    for (const TextDelta& d : steps.deltas) {
        if (answered && !d.reasoning.empty()) return false;
        answered = answered || !d.content.empty();
    }
    return true;
}

}  // namespace

TEST_CASE("pipeline: a reasoning budget closes the think block itself after exactly that many tokens") {
    const std::int32_t close = *tokenizer().find("</think>");
    const std::vector<std::int32_t> close_tail = tokens("\n");
    REQUIRE(close_tail.size() == 1);
    for (const int budget : {0, 1, 5, 23}) {
        for (const std::string_view prefix : {"<think>\n", ""}) {
            CAPTURE(budget);
            CAPTURE(prefix);
            GenerationParams params;
            params.sampling.temperature = 1.0f;
            params.sampling.seed = 7;
            params.reasoning_budget = budget;
            params.max_tokens = budget + 12;
            const std::int32_t open = *tokenizer().find("<think>");
            // Forced into thinking: by the prefix, or by a first token that opens the block.
            const int first = prefix.empty() ? 1 : 0;
            const Steps steps = random_steps(params, prefix, 11, [&](int step, std::vector<float>& logits) {
                never_ends_or_closes(step, logits);
                if (prefix.empty() && step == 0) logits[std::size_t(open)] = 1e9f;
            });
            REQUIRE(steps.picked.size() == std::size_t(params.max_tokens));
            CHECK(steps.thinking_tokens == budget);
            for (int i = first; i < first + budget; ++i) CHECK(steps.picked[std::size_t(i)] != close);
            CHECK(steps.picked[std::size_t(first + budget)] == close);
            CHECK(steps.picked[std::size_t(first + budget + 1)] == close_tail[0]);
            CHECK(steps.reason == FinishReason::max_tokens);
            CHECK(!steps.text.content.empty());
            CHECK(steps.text.reasoning.empty() == (budget == 0));
            CHECK(reasoning_then_content(steps));
        }
    }
    // Without a budget the same model thinks on to max_tokens.
    GenerationParams unlimited;
    unlimited.sampling.temperature = 1.0f;
    unlimited.max_tokens = 30;
    const Steps free_thinking = random_steps(unlimited, "<think>\n", 11, never_ends_or_closes);
    CHECK(free_thinking.thinking_tokens == 30);
    CHECK(free_thinking.text.content.empty());
    // Out of range: refused before anything runs.
    for (const int bad : {-2, smol::kMaxReasoningBudget + 1}) {
        unlimited.reasoning_budget = bad;
        CHECK_THROWS_WITH_AS(GenerationPipeline(tokenizer(), unlimited, tokens("Hi"), ""),
                             doctest::Contains("reasoning budget"), smol::Error);
    }
}

TEST_CASE("pipeline: reasoning comes before a grammar, which holds the answer after </think>") {
    const auto json_object = token_grammar(smol::text::kJsonObjectGrammar);
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
        for (const int max_tokens : {6, 20, 60}) {
            CAPTURE(seed);
            CAPTURE(max_tokens);
            GenerationParams params;
            params.sampling.temperature = 1.0f;
            params.sampling.seed = seed;
            params.max_tokens = max_tokens;
            params.grammar = json_object;
            params.reasoning_budget = 8;
            // The model thinks (it never closes the block itself): the budget, or the room the
            // grammar needs, closes it; the answer is then a complete JSON object.
            const Steps steps = random_steps(params, "<think>\n", seed, [&](int, std::vector<float>& logits) {
                logits[std::size_t(*tokenizer().find("</think>"))] = -1e9f;
            });
            CAPTURE(steps.text.content);
            CHECK(steps.thinking_tokens > 0);
            CHECK(steps.thinking_tokens <= 8);
            CHECK(!steps.text.reasoning.empty());
            CHECK(nlohmann::json::parse(steps.text.content, nullptr, false).is_object());
            CHECK(reasoning_then_content(steps));
        }
    }
    // In thinking mode (no think block in the prompt) the answer's first token may open one.
    // Seeds 447 and 557 once gave answers with numbers no double holds ("4158E1079719997...").
    GenerationParams params;
    params.sampling.temperature = 1.0f;
    params.max_tokens = 40;
    params.grammar = json_object;
    params.reasoning_budget = 4;
    for (const std::uint32_t seed : {1u, 2u, 3u, 447u, 557u}) {
        CAPTURE(seed);
        params.sampling.seed = seed;
        const Steps opened = random_steps(params, "", 5, [&](int step, std::vector<float>& logits) {
            if (step == 0) logits[std::size_t(*tokenizer().find("<think>"))] = 1e9f;
        });
        CAPTURE(opened.text.content);
        CHECK(opened.thinking_tokens == 4);
        CHECK(nlohmann::json::parse(opened.text.content, nullptr, false).is_object());
    }
    params.sampling.seed = 5;
    // After the no-think block it may not: the grammar holds the first token.
    const Steps closed = random_steps(params, kNoThinkPrefix, 5, [&](int step, std::vector<float>& logits) {
        if (step == 0) logits[std::size_t(*tokenizer().find("<think>"))] = 1e9f;
    });
    CHECK(closed.thinking_tokens == 0);
    CHECK(closed.text.reasoning.empty());
    CHECK(nlohmann::json::parse(closed.text.content, nullptr, false).is_object());
}

TEST_CASE("pipeline: a lazy grammar leaves text free until its trigger, then holds the tool call to its schema") {
    const nlohmann::ordered_json schema = {
        {"type", "object"},
        {"properties", {{"name", {{"const", "get_weather"}}},
                        {"arguments", {{"type", "object"},
                                       {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
                                       {"required", {"city", "days"}}}}}},
        {"required", {"name", "arguments"}}};
    const std::string call = smol::text::json_schema_to_gbnf(schema);
    const auto call_grammar =
        token_grammar("root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\ncall" + call.substr(4));
    const std::int32_t trigger = *tokenizer().find("<tool_call>");
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
        CAPTURE(seed);
        GenerationParams params;
        params.sampling.temperature = 1.0f;
        params.sampling.seed = seed;
        params.max_tokens = 120;
        params.parse_tool_calls = true;
        params.grammar = call_grammar;
        params.grammar_trigger = "<tool_call>";
        const int trigger_at = 10;
        const auto force_trigger = [&](int step, std::vector<float>& logits) {
            never_ends_or_closes(step, logits);
            logits[std::size_t(trigger)] = step == trigger_at ? 1e9f : -1e9f;
        };
        const Steps lazy = random_steps(params, kNoThinkPrefix, seed, force_trigger);
        REQUIRE(lazy.text.tool_calls.size() >= 1);
        const smol::ToolCall& got = lazy.text.tool_calls.front();
        CHECK(got.name == "get_weather");
        const auto arguments = nlohmann::json::parse(got.arguments, nullptr, false);
        CAPTURE(got.arguments);
        CHECK(arguments.is_object());
        CHECK(arguments.contains("city"));
        CHECK(arguments.value("city", nlohmann::json()).is_string());
        CHECK(arguments.value("days", nlohmann::json()).is_number_integer());

        // Before the trigger the text is free: the same tokens as with no grammar at all.
        GenerationParams free_params = params;
        free_params.grammar = nullptr;
        free_params.grammar_trigger.clear();
        const Steps unconstrained = random_steps(free_params, kNoThinkPrefix, seed, force_trigger);
        for (int i = 0; i <= trigger_at; ++i) CHECK(lazy.picked[std::size_t(i)] == unconstrained.picked[std::size_t(i)]);
        CHECK(!lazy.text.content.empty());
    }
    // A trigger that is not one token, or without a grammar, is refused.
    GenerationParams bad;
    bad.grammar = call_grammar;
    bad.grammar_trigger = "<tool_call> and more";
    CHECK_THROWS_WITH_AS(GenerationPipeline(tokenizer(), bad, tokens("Hi"), ""), doctest::Contains("one token"), smol::Error);
    bad.grammar = nullptr;
    bad.grammar_trigger = "<tool_call>";
    CHECK_THROWS_WITH_AS(GenerationPipeline(tokenizer(), bad, tokens("Hi"), ""), doctest::Contains("needs a grammar"),
                         smol::Error);
}

TEST_CASE("pipeline: DRY sees the prompt's tail and takes its breakers from the vocabulary") {
    const auto one = [](std::string_view text) {
        const std::vector<std::int32_t> ids = tokens(text);
        REQUIRE(ids.size() == 1);
        return ids[0];
    };
    // Four ordinary tokens: none holds a breaker's character.
    std::vector<std::int32_t> plain;
    for (std::int32_t id = 300; plain.size() < 4; ++id) {
        const std::string& text = tokenizer().token_bytes(id);
        if (!text.empty() && text.find_first_of("\n:\"*") == std::string::npos) plain.push_back(id);
    }
    const std::int32_t newline = one("\n"), b = plain[0], c = plain[1], d = plain[2], e = plain[3];
    // "\n cat dog" ends the prompt and came before, followed by "sun": a repeat of 3 that the
    // newline (a default breaker) cuts to 2.
    const std::vector<std::int32_t> prompt = {newline, b, c, d, newline, b, c};
    const auto pick = [&](std::vector<std::string> breakers) {
        GenerationParams p = greedy();
        p.sampling.dry_multiplier = 1.0f;
        p.sampling.dry_base = 4.0f;
        p.sampling.dry_allowed_length = 2;
        p.sampling.dry_sequence_breakers = std::move(breakers);
        GenerationPipeline pipeline(tokenizer(), p, prompt, "");
        std::vector<float> logits(tokenizer().n_vocab(), 0.0f);
        logits[std::size_t(d)] = 2.0f;  // penalty 1 (length 2) leaves it first, 4 (length 3) does not
        logits[std::size_t(e)] = 0.5f;
        return pipeline.sample(logits);
    };
    CHECK(pick({"\n", ":", "\"", "*"}) == d);
    CHECK(pick({":"}) == e);
}


}  // namespace test_pipeline
