// smol-bench: prompt processing (pp) and generation (tg) speed, in llama-bench's shape and flags,
// so the numbers line up with llama.cpp's: `| model | size | params | threads | test | t/s | GB/s | share of limit |`.
//
//   smol-bench -m MODEL[,MODEL] [-p 512[,N]] [-n 128[,N]] [-t T[,T]] [-r 5] [-b 512]
//              [--spec-steps 1,2,4,8,16] [--no-warmup] [-o md|json]
//
// main() reads the options, measures the machine's limits (read_bandwidth.hpp, int8_peak.hpp),
// then per model plans the tests (plan_tests), runs each (run_test over a Runner) and prints a
// row; the notes and the machine's limits follow the table.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <map>
#include <optional>
#include <sstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "program_args.hpp"
#include "int8_peak.hpp"
#include "read_bandwidth.hpp"
#include "smol/hub.hpp"

namespace {

// llama.cpp's names for general.file_type; for files without one, the type holding most bytes.
std::string ftype_name(const smol::gguf::File& file) {
    if (const auto* v = file.find("general.file_type"); v && v->as_int()) {
        switch (*v->as_int()) {
            case 0: return "all F32";
            case 1: return "F16";
            case 2: return "Q4_0";
            case 3: return "Q4_1";
            case 7: return "Q8_0";
            case 8: return "Q5_0";
            case 14: return "Q4_K - Small";
            case 15: return "Q4_K - Medium";
            case 16: return "Q5_K - Small";
            case 17: return "Q5_K - Medium";
            case 18: return "Q6_K";
            case 32: return "BF16";
            default: break;
        }
    }
    std::vector<std::pair<std::uint64_t, std::string>> bytes_per_type;
    for (const auto& t : file.tensors()) {
        const std::string name(smol::type_name(t.type));
        auto it = std::find_if(bytes_per_type.begin(), bytes_per_type.end(), [&](auto& p) { return p.second == name; });
        if (it == bytes_per_type.end()) bytes_per_type.push_back({t.n_bytes, name});
        else it->first += t.n_bytes;
    }
    if (bytes_per_type.empty()) return "?";
    return std::max_element(bytes_per_type.begin(), bytes_per_type.end())->second;
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) smol::fail("--grammar: cannot read '", path, "'");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

struct Test {
    int n_prompt = 0;  // pp test when > 0
    int n_gen = 0;     // tg test when > 0
    int threads = 1;
    bool constrained = false;  // tg whose tokens are picked greedily under --grammar
    int depth = 0;             // tokens in the context before the timed part
    int step_tokens = 0;       // > 0: n_gen verify steps of this many tokens (--spec-steps)
    bool generated = false;    // genN: n_gen tokens picked greedily after a prompt that repeats itself
    bool speculative = false;  // genN+spec: the same with --spec
    int accept_percent = -1;   // >= 0: genN+spec@P%: drafts right with this chance a token (--spec-accept)
    std::string name() const {
        const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
        if (n_prompt > 0) return "pp" + std::to_string(n_prompt) + at;
        if (step_tokens > 0) return "step" + std::to_string(step_tokens) + at;
        if (generated)
            return "gen" + std::to_string(n_gen) + (speculative ? "+spec" : "") +
                   (accept_percent >= 0 ? "@" + std::to_string(accept_percent) + "%" : "") + at;
        return "tg" + std::to_string(n_gen) + (constrained ? "+grammar" : "") + at;
    }
};

struct Sample {
    std::vector<double> ns;  // per repetition
    std::vector<double> ts;  // tokens per second, per repetition
};

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
}
// Sample standard deviation, as llama-bench (0 for a single repetition).
double stddev(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1));
}

// Runs the tests through a smol::Sequence, the one a chat session and a server slot run
// their tokens through: the depth is a prefix the sequence keeps, pp and tg feed it, and
// tg+grammar picks its tokens with Sequence::step as a constrained reply does.
class Runner {
public:
    explicit Runner(smol::Engine& engine) : engine_(engine), logits_(std::size_t(engine.n_vocab())) {}

    // Constrained tg runs under this grammar (GBNF text), with the model file's tokenizer.
    // genN+spec runs with these (--spec, --draft-max, --draft-min).
    void use_speculation(const smol::SpeculationParams& speculation) { speculation_ = speculation; }
    // Drafted and accepted tokens of the genN+spec repetitions so far, by accept_percent.
    const std::map<int, std::pair<long, long>>& drafts() const { return drafts_; }

    void use_grammar(const std::string& gbnf) {
        (void)smol::text::Grammar::parse(gbnf);  // errors now, before any test runs
        (void)engine_.vocabulary_trie();         // built once, untimed
        grammar_text_ = gbnf;
    }

    // Makes the KV cache a test's repetitions share and fills its depth (untimed, once: each
    // repetition then cuts the sequence back to the depth, which is what starting again from a
    // context of that many tokens means).
    void prepare(const Test& test) {
        // Room for the widest verify step too, so tests of one depth share the cache: filling
        // 4096 tokens of depth takes a minute on two cores.
        const int needed =
            test.depth + test.n_prompt + test.n_gen + 1 + kSpareContext + kWidestStep + 3 * kRepeatedBlock;
        if (sequence_.has_cache() && sequence_.capacity() >= needed && filled_depth_ == test.depth &&
            sequence_.size() >= test.depth)
            return;  // run_once cuts it back to the depth
        filled_depth_ = test.depth;
        sequence_.release_cache();  // the previous test's cache goes before the next one is allocated
        sequence_.set_cache(engine_.make_cache(needed));
        if (test.depth > 0) {
            sequence_.start(random_tokens(test.depth), nullptr);
            sequence_.feed(engine_, logits_);
        }
    }

    // Nanoseconds for one repetition, from a sequence holding exactly the test's depth.
    double run_once(const Test& test) {
        sequence_.truncate(std::size_t(test.depth));
        // The test's tokens continue the depth, which start() keeps as a shared prefix.
        std::vector<std::int32_t> tokens(sequence_.tokens().begin(), sequence_.tokens().end());
        const auto append = [&](const std::vector<std::int32_t>& more) {
            tokens.insert(tokens.end(), more.begin(), more.end());
        };
        if (test.n_prompt > 0) {
            append(random_tokens(test.n_prompt));
            sequence_.start(tokens, nullptr);
            const auto start = std::chrono::steady_clock::now();
            sequence_.feed(engine_, logits_);  // one forward of the whole prompt, last logits only
            return elapsed_ns(start);
        }
        // A 1-token start, untimed, so every timed step attends over a non-empty cache.
        append(random_tokens(1));
        if (test.constrained) return run_constrained(test, tokens);
        if (test.step_tokens > 0) return run_verify_steps(test, tokens);
        if (test.generated) return run_generated(test, tokens);
        append(random_tokens(test.n_gen));
        sequence_.start(tokens, nullptr);
        sequence_.feed(engine_, logits_, 1);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < test.n_gen; ++i) sequence_.feed(engine_, logits_, 1);
        return elapsed_ns(start);
    }

private:
    static constexpr int kSpareContext = 16;
    static constexpr int kRepeatedBlock = 64;  // genN's prompt: this many random tokens, twice
    static constexpr int kWidestStep = smol::SpeculationParams::kMaxDraft + 1;

    // tg with each token picked greedily under the grammar, as a constrained reply is
    // generated: Sequence::step (the grammar masks, the sampler picks, the text stages run),
    // then the token is fed. A fresh compiled grammar per repetition, so what it learns about
    // its states is paid for inside the timing; a reply that ends (its sentence complete, end
    // of generation picked) is followed by the next one, so every repetition feeds n_gen tokens.
    double run_constrained(const Test& test, const std::vector<std::int32_t>& start_tokens) {
        smol::GenerationParams params;
        params.sampling.temperature = 0.0f;  // greedy
        params.split_reasoning = false;      // raw text: no think tags to look for
        params.grammar = std::make_shared<const smol::TokenGrammar>(smol::text::Grammar::parse(grammar_text_),
                                                                    engine_.vocabulary_trie());
        // Each reply may take the tokens the repetition has left, so the grammar's budget is theirs.
        params.max_tokens = test.n_gen;
        std::optional<smol::GenerationPipeline> reply;
        reply.emplace(engine_.tokenizer(), params, start_tokens, "");
        sequence_.start(start_tokens, &*reply);
        sequence_.feed(engine_, logits_);  // the start token, untimed
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < test.n_gen; ++i) {
            smol::TextDelta shown;
            if (sequence_.step(logits_, shown)) {
                sequence_.end();  // this reply is over; the next continues after the token that ended it
                std::vector<std::int32_t> context(sequence_.tokens().begin(), sequence_.tokens().end());
                context.push_back(sequence_.picked());
                const bool more = i + 1 < test.n_gen;
                if (more) {
                    params.max_tokens = test.n_gen - i - 1;
                    reply.emplace(engine_.tokenizer(), params, context, "");
                }
                sequence_.start(context, more ? &*reply : nullptr);
            }
            sequence_.feed(engine_, logits_, 1);
        }
        const double ns = elapsed_ns(start);
        sequence_.end();  // the reply goes out of scope
        return ns;
    }

    // stepK: n_gen verify steps as a speculating Sequence runs them (next_input carries the
    // picked token and a draft of K-1, the forward pass gives every row's logits, step() picks
    // from them), with drafts that are always wrong, so each step keeps one token and rolls back
    // K-1 positions: the cost of checking K tokens where plain decoding runs one. Greedy picks.
    double run_verify_steps(const Test& test, const std::vector<std::int32_t>& start_tokens) {
        smol::GenerationParams params;
        params.sampling.temperature = 0.0f;
        params.split_reasoning = false;
        params.speculation.type = smol::SpeculationType::ngram;
        params.speculation.draft_max = std::max(1, test.step_tokens - 1);
        params.speculation.adaptive = false;  // every step drafts, however often it is wrong
        const std::size_t draft = std::size_t(test.step_tokens - 1);
        const std::int32_t n_vocab = engine_.n_vocab();
        sequence_.set_drafter([draft, n_vocab](std::span<const std::int32_t> context, std::size_t max_tokens,
                                               std::vector<std::int32_t>& out) {
            // A token the greedy pick after a random context all but never is: not checked by
            // the step's timing, which is the same whichever row rejects.
            for (std::size_t i = 0; i < std::min(draft, max_tokens); ++i) out.push_back((context.back() + 1) % n_vocab);
        });
        smol::GenerationPipeline reply(engine_.tokenizer(), params, start_tokens, "");
        sequence_.start(start_tokens, &reply);
        step_logits_.resize(std::size_t(n_vocab) * std::size_t(test.step_tokens));
        sequence_.feed(engine_, step_logits_);  // the start token, untimed
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < test.n_gen; ++i) {
            smol::TextDelta shown;
            sequence_.step(step_logits_, shown);  // greedy, max_tokens unset: never ends in n_gen steps
            const smol::SequenceBatch input = sequence_.next_input(smol::Sequence::kWholePrompt, draft);
            if (input.tokens.size() != std::size_t(test.step_tokens))
                smol::fail("smol-bench: a verify step of ", test.step_tokens, " tokens carried ", input.tokens.size());
            engine_.forward(*input.cache, input.tokens, step_logits_.data(), input.all_logits);
            sequence_.ran(input.tokens.size());
        }
        const double ns = elapsed_ns(start);
        sequence_.end();
        sequence_.set_drafter({});
        return ns;
    }

    // genN (+spec): n_gen tokens picked greedily, as a reply is generated, after a prompt that
    // holds a block of random tokens twice and the start of a third copy: a model that copies
    // (a trained one asked to repeat a document) gets its drafts accepted, a random one does not,
    // and the table shows what speculation costs or gains on this model either way. A reply that
    // ends early is followed by the next, so every repetition picks n_gen tokens.
    double run_generated(const Test& test, std::vector<std::int32_t> prompt) {
        const std::vector<std::int32_t> start_tokens = prompt;  // what --spec-accept's plain run continues
        std::mt19937 block_rng(99);  // the same prompt for gen and gen+spec
        std::uniform_int_distribution<std::int32_t> pick(0, engine_.n_vocab() - 1);
        std::vector<std::int32_t> block(kRepeatedBlock);
        for (auto& id : block) id = pick(block_rng);
        for (int copy = 0; copy < 2; ++copy) prompt.insert(prompt.end(), block.begin(), block.end());
        prompt.insert(prompt.end(), block.begin(), block.begin() + 8);
        smol::GenerationParams params;
        params.sampling.temperature = 0.0f;
        params.split_reasoning = false;
        if (test.speculative) params.speculation = speculation_;
        params.max_tokens = test.n_gen;
        if (test.accept_percent >= 0) {
            // The tokens plain decoding picks here (untimed), then drafts that get each next one
            // right with the test's chance: the acceptance a trained model copying text would see.
            Test plain = test;
            plain.speculative = false;
            plain.accept_percent = -1;
            run_generated(plain, start_tokens);
            const std::size_t prompt_size = prompt.size();
            const std::int32_t n_vocab = engine_.n_vocab();
            sequence_.set_drafter([truth = std::move(generated_), prompt_size, n_vocab, chance = test.accept_percent,
                                   rng = std::mt19937(7)](std::span<const std::int32_t> context, std::size_t max_tokens,
                                                          std::vector<std::int32_t>& draft) mutable {
                std::uniform_int_distribution<int> percent(0, 99);
                for (std::size_t i = 0; i < max_tokens; ++i) {
                    const std::size_t at = context.size() - prompt_size + i;
                    const std::int32_t right = at < truth.size() ? truth[at] : 0;
                    draft.push_back(percent(rng) < chance ? right : (right + 1) % n_vocab);
                }
            });
        }
        generated_.clear();
        const int rows = params.speculation.enabled() ? 1 + params.speculation.draft_max : 1;
        step_logits_.resize(std::size_t(engine_.n_vocab()) * std::size_t(rows));
        std::optional<smol::GenerationPipeline> reply;
        reply.emplace(engine_.tokenizer(), params, prompt, "");
        sequence_.start(prompt, &*reply);
        while (sequence_.reading_prompt()) sequence_.feed(engine_, step_logits_);  // untimed
        int picked = 0;
        const auto start = std::chrono::steady_clock::now();
        while (true) {
            smol::TextDelta shown;
            const int before = reply->generated_tokens();
            const bool ended = sequence_.step(step_logits_, shown);
            picked += reply->generated_tokens() - before;

            if (ended) {
                drafts_[test.accept_percent].first += reply->usage().drafted_tokens;
                drafts_[test.accept_percent].second += reply->usage().accepted_tokens;
                sequence_.end();
                if (picked >= test.n_gen) break;
                // The next reply continues after the token that ended this one.
                std::vector<std::int32_t> context(sequence_.tokens().begin(), sequence_.tokens().end());
                context.push_back(sequence_.picked());
                params.max_tokens = test.n_gen - picked;
                reply.emplace(engine_.tokenizer(), params, context, "");
                sequence_.start(context, &*reply);
            }
            sequence_.feed(engine_, step_logits_);
        }
        const double ns = elapsed_ns(start);
        // The tokens picked, in order: the cache's after the prompt, then the one picked last.
        generated_.assign(sequence_.tokens().begin() + std::ptrdiff_t(prompt.size()), sequence_.tokens().end());
        generated_.push_back(sequence_.picked());
        sequence_.set_drafter({});
        return ns;
    }

    static double elapsed_ns(std::chrono::steady_clock::time_point start) {
        return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
    std::vector<std::int32_t> random_tokens(int n) {
        std::uniform_int_distribution<std::int32_t> pick(0, engine_.n_vocab() - 1);
        std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
        for (auto& id : ids) id = pick(rng_);
        return ids;
    }

    smol::Engine& engine_;
    smol::Sequence sequence_;    // the current test's cache and the tokens it holds
    std::vector<float> logits_;  // [n_vocab]: the last row only
    std::vector<float> step_logits_;  // [K, n_vocab]: a verify step's rows
    std::mt19937 rng_{1234};
    std::string grammar_text_;   // with --grammar
    int filled_depth_ = -1;      // the depth the cache was filled to
    smol::SpeculationParams speculation_;  // genN+spec's
    // Drafted and accepted tokens over genN+spec's replies, by accept_percent (-1: prompt lookup).
    std::map<int, std::pair<long, long>> drafts_;
    std::vector<std::int32_t> generated_;  // the tokens the last genN picked
};

std::string iso_time_now() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return buf;
}

// Everything the command line says.
struct Options {
    std::vector<std::string> models;
    smol::hub::ModelSource hf;  // -hf and --hf-file, when no -m is given
    std::vector<int> prompts = {512}, gens = {128}, threads = {omp_get_max_threads()}, depths = {0};
    smol::RopeScalingRequest rope_scaling;
    smol::KvCacheTypes cache_types;
    int repetitions = 5, batch = 512;
    bool warmup = true, bandwidth = true, int8_peak = true, repack = true;
    std::string format = "md";
    std::string grammar;                // --grammar: GBNF text for the constrained tg tests
    std::vector<int> step_sizes;        // --spec-steps: tokens per verify step
    std::vector<int> accept_percents;   // --spec-accept: genN+spec@P% tests
    smol::SpeculationParams speculation;  // --spec: genN and genN+spec tests

    bool markdown() const { return format == "md"; }
    bool any_pp() const { return std::any_of(prompts.begin(), prompts.end(), [](int n) { return n > 0; }); }
    bool any_tg() const { return std::any_of(gens.begin(), gens.end(), [](int n) { return n > 0; }); }
};

// The flags that pick the tests.
std::vector<smol::args::Flag> test_flags(Options& o) {
    using namespace smol::args;
    const auto grammar = [&o](const std::string&, const std::string& g) {
        o.grammar = g == "json" ? std::string(smol::text::kJsonObjectGrammar) : read_text_file(g);
    };
    return {
        {{"-p", "--n-prompt"}, "N,...", "prompt lengths; 0 skips pp", int_list_value(o.prompts, 0, 1'000'000)},
        {{"-n", "--n-gen"}, "N,...", "generated tokens; 0 skips tg", int_list_value(o.gens, 0, 1'000'000)},
        {{"-d", "--n-depth"}, "N,...",
         "tokens already in the context when a test runs, as llama-bench's -d: pp512 @ d4096 is 512 more after 4096",
         int_list_value(o.depths, 0, 1'000'000)},
        threads_list_flag(o.threads),
        {{"-r", "--repetitions"}, "N", "repetitions per test", integer_value(o.repetitions, 1, 1'000'000)},
        {{"-b", "--batch-size"}, "N", "tokens per forward chunk", integer_value(o.batch, 1, 1'000'000)},
        {{"--no-warmup"}, "", "skip the untimed warm-up run before each test", switch_value(o.warmup, false)},
        {{"--no-bandwidth"}, "", "skip measuring the machine's read limit", switch_value(o.bandwidth, false)},
        {{"--no-int8-peak"}, "", "skip measuring the kernel set's int8 multiply-add peak", switch_value(o.int8_peak, false)},
        {{"--spec-steps"}, "K,...",
         "also run stepK tests: N decode steps each carrying K tokens (a speculative verify step: the picked token "
         "and K-1 drafted, every row's logits) whose drafts are all rejected (the cache rolls back K-1 positions), "
         "their repetitions interleaved; t/s is steps/s, and a table of each step's cost against a one-token step "
         "follows (K=1 always runs)",
         int_list_value(o.step_sizes, 1, smol::SpeculationParams::kMaxDraft + 1)},  // kWidestStep
        {{"--spec-accept"}, "P,...",
         "with --spec ngram, also run genN+spec@P%: drafts right with chance P% per token (the plain run's tokens, "
         "found first, untimed): the speed at the acceptance a model copying text would give",
         int_list_value(o.accept_percents, 0, 100, "percents")},
        {{"--grammar"}, "json|FILE",
         "also run each tg test as tgN+grammar: tokens picked greedily under a GBNF grammar (json: any JSON "
         "object), to show what the constraint costs beside the free tg",
         text_reader(grammar)},
        {{"-o", "--output"}, "md|json", "output format", choice_value(o.format, {"md", "json"})},
    };
}

// smol-bench's one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(Options& o, bool& help) {
    using namespace smol::args;
    FlagTable table("usage: smol-bench [-m MODEL | -hf REPO[:QUANT]] [options]\n"
                    "  Measures prompt processing (ppN: one forward of N random tokens, last logits only) and\n"
                    "  generation (tgN: N single-token forwards after a 1-token start) like llama-bench.\n"
                    "options (lists are comma-separated; every combination is run):");
    table.add({{"-m", "--model"}, "FILE,...", "model(s) to benchmark", comma_list_value(o.models)})
        .add(hub_flags(o.hf.hf_repo, o.hf.hf_file))
        .add(test_flags(o))
        .add(rope_scaling_flags(o.rope_scaling))
        .add(kv_cache_type_flags(o.cache_types))
        .add(repack_flag(o.repack))
        .add(speculation_flags(o.speculation))
        .note("  (with --spec ngram, also run genN and genN+spec for each tg test: N tokens picked greedily after a\n"
              "  prompt that repeats a block of random tokens, without and with speculative decoding)")
        .add(help_flag(help))
        .note("GB/s is the bytes one generated token reads (every weight matrix, LM head included, plus the\n"
              "KV cache rows it attends over at its test's depth) times tokens/s; it is printed for tg only,\n"
              "where each token streams all of them from memory. The last column is a test's share of the\n"
              "machine's limit for it, measured first: tg's GB/s against the memory read limit (\"read\"), pp's\n"
              "int8 multiply-adds per second (the weight matrices' rows x cols per token, the LM head once)\n"
              "against the int8 peak of the kernel set that runs, timed on as many threads (\"int8\").");
    return table;
}

void usage(std::FILE* out) {
    Options o;
    bool help = false;
    std::fputs(flag_table(o, help).help().c_str(), out);
}

// Reads argv into `options`; returns the exit status when the program should end here (--help,
// a bad flag).
std::optional<int> parse_options(int argc, char** argv, Options& o) {
    bool help = false;
    const smol::args::FlagTable table = flag_table(o, help);
    // std::exception: --grammar's reader and the speculation check throw smol::Error.
    return table.parse_or_exit_status<std::exception>(argc, argv, help, "smol-bench", [&] {
        if (!o.step_sizes.empty() && std::find(o.step_sizes.begin(), o.step_sizes.end(), 1) == o.step_sizes.end())
            o.step_sizes.insert(o.step_sizes.begin(), 1);  // the step every other is compared with
        for (int& t : o.threads) t = smol::thread_team(t);  // 0: OpenMP's default, named as the count it is
        o.speculation.validate();  // --draft-min against --draft-max
    });
}

// Without -m: -hf's model, or the cached default. Returns the exit status when there is none.
std::optional<int> resolve_default_model(Options& o) {
    if (!o.models.empty()) return std::nullopt;
    try {
        const auto hub = smol::hub::default_options();
        const auto path = smol::hub::resolve_model_source(o.hf, hub);
        if (!path) {
            std::fprintf(stderr, "smol-bench: %s\n", smol::hub::no_model_message(hub).c_str());
            usage(stderr);
            return 2;
        }
        o.models.push_back(path->string());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-bench: error: %s\n", e.what());
        return 1;
    }
    return std::nullopt;
}

// Every test the options ask for, in the order they run: per thread count and depth, the pp
// tests, then each tg test with its variants.
std::vector<Test> plan_tests(const Options& o) {
    std::vector<Test> tests;
    for (int t : o.threads)
        for (int d : o.depths) {
            for (int p : o.prompts)
                if (p > 0) tests.push_back({.n_prompt = p, .threads = t, .depth = d});
            for (int n : o.gens) {
                if (n <= 0) continue;
                tests.push_back({.n_gen = n, .threads = t, .depth = d});
                if (!o.grammar.empty()) tests.push_back({.n_gen = n, .threads = t, .constrained = true, .depth = d});
                for (int k : o.step_sizes) tests.push_back({.n_gen = n, .threads = t, .depth = d, .step_tokens = k});
                if (!o.speculation.enabled()) continue;
                tests.push_back({.n_gen = n, .threads = t, .depth = d, .generated = true});
                tests.push_back({.n_gen = n, .threads = t, .depth = d, .generated = true, .speculative = true});
                for (int percent : o.accept_percents)
                    tests.push_back({.n_gen = n, .threads = t, .depth = d, .generated = true, .speculative = true,
                                     .accept_percent = percent});
            }
        }
    return tests;
}

// What the machine can do at each thread count, measured before the tests: its memory read limit
// (for tg, which streams the weights) and the int8 multiply-add peak of the kernel set that runs
// (for pp, which is bound by those products). A limit not measured reads 0. Beside them, the
// CPUs each team may run on: a team bound to fewer CPUs than it has threads runs at a fraction of
// its speed.
struct MachineLimits {
    std::vector<int> threads;
    std::vector<double> read_gbps;         // [threads], or empty
    std::vector<double> int8_macs_per_s;   // [threads], or empty
    std::vector<std::vector<int>> team_cpus;  // [threads]; empty where the system cannot say
    const smol::Int8PeakLoop* int8_loop = nullptr;  // the loop timed, where the set has one

    // values[i] for threads[i] == t; T{} (0, no CPUs) where not measured.
    template <class T>
    static T at(const std::vector<int>& threads, const std::vector<T>& values, int t) {
        for (std::size_t i = 0; i < values.size(); ++i)
            if (threads[i] == t) return values[i];
        return T{};
    }
    double read(int t) const { return at(threads, read_gbps, t); }
    double int8(int t) const { return at(threads, int8_macs_per_s, t); }
    std::vector<int> cpus(int t) const { return at(threads, team_cpus, t); }
};

// CPU numbers as taskset -c writes them: runs of consecutive CPUs as first-last, e.g. "0-3,6".
std::string cpu_list(const std::vector<int>& cpus) {
    std::string text;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t last = i;
        while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
        if (!text.empty()) text += ',';
        text += std::to_string(cpus[i]);
        if (last > i) text += '-' + std::to_string(cpus[last]);
        i = last + 1;
    }
    return text;
}

// Each limit only where a test will be compared with it (read: tg tests; int8: pp tests).
MachineLimits measure_limits(const Options& o) {
    MachineLimits limits;
    limits.threads = o.threads;
    // In a child process, before any OpenMP region runs here (read_bandwidth.hpp says why).
    if (o.bandwidth && o.any_tg()) limits.read_gbps = smol_bench::measure_read_bandwidth(o.threads);
    if (o.int8_peak && o.any_pp()) {
        limits.int8_loop = smol::int8_peak_loop(smol::kernels().isa);
        if (limits.int8_loop != nullptr)
            for (int t : o.threads) limits.int8_macs_per_s.push_back(smol_bench::measure_int8_peak(*limits.int8_loop, t));
    }
    for (int t : o.threads) limits.team_cpus.push_back(smol::team_cpus(t));
    return limits;
}

// One model's facts every row repeats.
struct ModelFacts {
    std::string path, type;
    smol::ModelInfo info;
    std::size_t kv_bytes_per_token = 0;
    double load_ms = 0;
};

// A test's figures: its speed, and what it moved against the machine's limits.
struct Figures {
    double avg_ts = 0, sd_ts = 0;
    bool is_gen = false;
    double gbps = 0;             // tg: bytes each token reads times tokens/s
    double int8_macs_per_s = 0;  // pp: the weights' int8 multiply-adds per second
    double read_share = 0;       // of the read limit, 0 where not measured
    double int8_share = 0;       // of the int8 peak, 0 where not measured
};

Figures figures_of(const Test& test, const Sample& sample, const ModelFacts& model, const MachineLimits& limits) {
    Figures f;
    f.avg_ts = mean(sample.ts);
    f.sd_ts = stddev(sample.ts);
    f.is_gen = test.n_gen > 0;
    // Bytes each token reads times tokens/s: meaningful for tg, where every token streams all
    // matrices and the cache rows before it (on average the depth, the start token and half the
    // generated ones); a pp batch reads each weight once for many tokens.
    const double kv_read = double(model.kv_bytes_per_token) * (test.depth + 1 + 0.5 * (test.n_gen + 1));
    f.gbps = (double(model.info.matrix_bytes) + (f.is_gen ? kv_read : 0.0)) * f.avg_ts / 1e9;
    if (f.is_gen && limits.read(test.threads) > 0) f.read_share = f.gbps / limits.read(test.threads);
    if (test.n_prompt > 0) {
        // Every layer's matrices for each token, the LM head for the last one (pp wants its logits only).
        const double macs = double(test.n_prompt) * double(model.info.int8_macs.layers) + double(model.info.int8_macs.head);
        f.int8_macs_per_s = macs * f.avg_ts / double(test.n_prompt);
        if (limits.int8(test.threads) > 0) f.int8_share = f.int8_macs_per_s / limits.int8(test.threads);
    }
    return f;
}

nlohmann::json null_or(bool present, double value) { return present ? nlohmann::json(value) : nlohmann::json(nullptr); }

nlohmann::json json_row(const Test& test, const Sample& sample, const Figures& f, const ModelFacts& model,
                        const MachineLimits& limits, const Options& o) {
    const std::vector<int> team_cpus = limits.cpus(test.threads);
    nlohmann::json row = {
        {"model_filename", model.path},
        {"model_type", model.type},
        {"model_size", model.info.tensor_bytes},
        {"model_n_params", model.info.n_params},
        {"n_batch", o.batch},
        {"n_threads", test.threads},
        {"n_prompt", test.n_prompt},
        {"n_gen", test.n_gen},
        {"n_depth", test.depth},
        {"n_step_tokens", test.step_tokens},
        {"type_k", smol::kv_type_name(o.cache_types.keys)},
        {"type_v", smol::kv_type_name(o.cache_types.values)},
        {"kv_bytes_per_token", model.kv_bytes_per_token},
        {"test", test.name()},
        {"test_time", iso_time_now()},
        {"avg_ns", std::llround(mean(sample.ns))},
        {"stddev_ns", std::llround(stddev(sample.ns))},
        {"avg_ts", f.avg_ts},
        {"stddev_ts", f.sd_ts},
        {"samples_ns", sample.ns},
        {"samples_ts", sample.ts},
        {"gbps", null_or(f.is_gen, f.gbps)},
        {"read_gbps", null_or(limits.read(test.threads) > 0, limits.read(test.threads))},
        {"bandwidth_fraction", null_or(f.read_share > 0, f.read_share)},
        {"int8_macs_per_s", null_or(test.n_prompt > 0, f.int8_macs_per_s)},
        {"int8_peak_macs_per_s", null_or(limits.int8(test.threads) > 0, limits.int8(test.threads))},
        {"int8_peak_fraction", null_or(f.int8_share > 0, f.int8_share)},
        {"peak_rss_bytes", smol::platform::peak_resident_bytes()},  // of the process so far, not of this test alone
        {"load_ms", model.load_ms},
        {"team_cpus", team_cpus.empty() ? nlohmann::json(nullptr) : nlohmann::json(team_cpus)},
    };
#ifdef SMOL_BUILD_COMMIT
    row["build_commit"] = SMOL_BUILD_COMMIT;
#endif
    return row;
}

void print_table_header() {
    std::printf("| %-40s | %10s | %8s | %7s | %14s | %20s | %8s | %14s |\n", "model", "size", "params", "threads", "test",
                "t/s", "GB/s", "share of limit");
    std::printf("| %-40s | %10s | %8s | %7s | %14s | %20s | %8s | %14s |\n", std::string(40, '-').c_str(), "---------:",
                "-------:", "------:", "-------------:", "-------------------:", "-------:", "-------------:");
    std::fflush(stdout);
}

void print_table_row(const Test& test, const Figures& f, const ModelFacts& model) {
    char size[32], params[32], ts[48], bw[32], share[32];
    std::snprintf(size, sizeof size, "%.2f GiB", double(model.info.tensor_bytes) / double(1ull << 30));
    std::snprintf(params, sizeof params, "%.2f B", double(model.info.n_params) / 1e9);
    std::snprintf(ts, sizeof ts, "%.2f ± %.2f", f.avg_ts, f.sd_ts);
    if (f.is_gen) std::snprintf(bw, sizeof bw, "%.2f", f.gbps);
    else std::snprintf(bw, sizeof bw, "-");
    if (f.read_share > 0) std::snprintf(share, sizeof share, "%.0f%% read", 100 * f.read_share);
    else if (f.int8_share > 0) std::snprintf(share, sizeof share, "%.0f%% int8", 100 * f.int8_share);
    else std::snprintf(share, sizeof share, "-");
    // "±" is two bytes but one column: pad the t/s field by one more byte.
    std::printf("| %-40s | %10s | %8s | %7d | %14s | %21s | %8s | %14s |\n", model.type.c_str(), size, params, test.threads,
                test.name().c_str(), ts, bw, share);
    std::fflush(stdout);
}

// stepK tests of one thread count, depth and n run interleaved (step1, step2, .., step1, step2,
// ..), so a neighbour's load on a shared machine falls on all of them alike and their ratios hold.
bool same_step_group(const Test& a, const Test& b) {
    return a.step_tokens > 0 && b.step_tokens > 0 && a.threads == b.threads && a.depth == b.depth && a.n_gen == b.n_gen;
}

// Runs tests[index]'s repetitions (after an untimed warm-up unless --no-warmup) and returns its
// samples. The first of a group of stepK tests runs the whole group, interleaved; the samples of
// the others wait in `interleaved` until their turn.
Sample run_test(Runner& runner, const std::vector<Test>& tests, std::size_t index, const Options& o,
                std::vector<Sample>& interleaved) {
    const Test& test = tests[index];
    const auto warm = [&](const Test& t) {
        if (!o.warmup) return;
        Test short_test = t;
        if (short_test.n_gen > 0) short_test.n_gen = 1;  // as llama-bench: one token warms tg
        runner.run_once(short_test);
    };
    const auto measure = [&](const Test& t, Sample& into) {
        const double ns = runner.run_once(t);
        into.ns.push_back(ns);
        into.ts.push_back(1e9 * double(t.n_prompt > 0 ? t.n_prompt : t.n_gen) / ns);
    };
    if (test.step_tokens == 0) {
        Sample sample;
        warm(test);
        for (int r = 0; r < o.repetitions; ++r) measure(test, sample);
        return sample;
    }
    if (index == 0 || !same_step_group(tests[index - 1], test)) {
        std::size_t end = index + 1;
        while (end < tests.size() && same_step_group(tests[end], test)) ++end;
        for (std::size_t j = index; j < end; ++j) warm(tests[j]);
        for (int r = 0; r < o.repetitions; ++r)
            for (std::size_t j = index; j < end; ++j) measure(tests[j], interleaved[j]);
    }
    return interleaved[index];
}

struct StepCost {
    int threads, depth, tokens;
    std::vector<double> ns;  // per repetition, n_gen steps each
};

// What the tables print after their rows.
struct Report {
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::string> footnotes;
    std::vector<StepCost> step_costs;  // --spec-steps, in the order run
};

smol::LoadOptions load_options(const Options& o) {
    smol::LoadOptions options;
    options.max_batch = o.batch;
    options.rope_scaling = o.rope_scaling;
    options.cache_types = o.cache_types;
    options.repack = o.repack;
    const int widest_step = o.step_sizes.empty() ? 0 : *std::max_element(o.step_sizes.begin(), o.step_sizes.end());
    options.context = *std::max_element(o.depths.begin(), o.depths.end()) +
                      std::max(*std::max_element(o.prompts.begin(), o.prompts.end()),
                               *std::max_element(o.gens.begin(), o.gens.end()) + 1 + widest_step);
    return options;
}

// Loads one model, runs every test on it and adds its rows and notes to the report.
void bench_model(const std::string& path, const Options& o, const MachineLimits& limits, Report& report) {
    const auto load_start = std::chrono::steady_clock::now();
    smol::Engine engine(path, load_options(o));  // the model and its tokenizer (for --grammar)
    ModelFacts model;
    model.path = path;
    model.info = engine.info();
    model.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
    if (model.info.rope_scaling.yarn())  // on stderr as the other programs say it, so JSON stays clean
        std::fprintf(stderr, "smol-bench: RoPE scaling: %s%s\n", smol::describe(model.info.rope_scaling).c_str(),
                     model.info.rope_scaling_automatic ? " (the context is past the trained one)" : "");
    model.type = model.info.architecture + " " + model.info.config_name + " " + ftype_name(engine.model().file());
    if (o.cache_types != smol::KvCacheTypes{})  // as llama-bench names non-default cache types
        model.type += std::string(" K ") + smol::kv_type_name(o.cache_types.keys) + " V " +
                      smol::kv_type_name(o.cache_types.values);
    model.kv_bytes_per_token = engine.make_cache(1).bytes_per_token();
    Runner runner(engine);
    if (!o.grammar.empty()) runner.use_grammar(o.grammar);
    runner.use_speculation(o.speculation);

    const std::vector<Test> tests = plan_tests(o);
    std::vector<Sample> interleaved(tests.size());
    for (std::size_t index = 0; index < tests.size(); ++index) {
        const Test& test = tests[index];
        engine.set_threads(test.threads);
        runner.prepare(test);
        const Sample sample = run_test(runner, tests, index, o, interleaved);
        const Figures f = figures_of(test, sample, model, limits);
        if (o.markdown()) print_table_row(test, f, model);
        report.rows.push_back(json_row(test, sample, f, model, limits, o));
        if (test.step_tokens > 0) report.step_costs.push_back({test.threads, test.depth, test.step_tokens, sample.ns});
    }
    char note[256];
    std::snprintf(note, sizeof note, "%s: load %.0f ms, weights read per token %.2f GB, %s", path.c_str(), model.load_ms,
                  double(model.info.matrix_bytes) / 1e9, model.info.config_name.c_str());
    report.footnotes.push_back(note);
    for (const auto& [percent, counts] : runner.drafts()) {
        if (counts.first == 0) continue;
        const std::string drafter = percent < 0 ? "--spec " + std::string(smol::to_string(o.speculation.type))
                                                : "drafts right " + std::to_string(percent) + "% of the time";
        std::snprintf(note, sizeof note,
                      "gen+spec (%s, --draft-max %d, --draft-min %d): %ld of %ld drafted tokens accepted (%.1f%%)",
                      drafter.c_str(), o.speculation.draft_max, o.speculation.draft_min, counts.second, counts.first,
                      100.0 * double(counts.second) / double(counts.first));
        report.footnotes.push_back(note);
    }
}

// The machine's limits, under the rows they explain.
void print_limits(const MachineLimits& limits, const Options& o) {
    const auto plural = [](int t) { return t == 1 ? "" : "s"; };
    for (std::size_t i = 0; i < limits.read_gbps.size(); ++i)
        std::printf("memory read limit, %d thread%s: %.2f GB/s (4 prefetching streams per thread over %.0f MiB); "
                    "tg's GB/s as %% of it\n",
                    limits.threads[i], plural(limits.threads[i]), limits.read_gbps[i],
                    double(smol_bench::bandwidth_buffer_bytes()) / double(1 << 20));
    const smol::Int8PeakLoop* loop = limits.int8_loop;
    for (std::size_t i = 0; i < limits.int8_macs_per_s.size(); ++i)
        std::printf("int8 peak, %d thread%s: %.1f G MAC/s (%s set: %s over %d accumulators per thread); pp's int8 "
                    "MACs (weight matrices' rows x cols per token, the LM head once) as %% of it\n",
                    limits.threads[i], plural(limits.threads[i]), limits.int8_macs_per_s[i] / 1e9,
                    std::string(smol::isa_name(loop->isa)).c_str(), loop->instruction, loop->chains);
    if (o.int8_peak && o.any_pp() && loop == nullptr)
        std::printf("int8 peak: not measured, the %s kernel set has no int8 peak loop\n",
                    std::string(smol::isa_name(smol::kernels().isa)).c_str());
    for (std::size_t i = 0; i < limits.team_cpus.size(); ++i)
        if (!limits.team_cpus[i].empty())
            std::printf("%d thread%s: may run on CPUs %s\n", limits.threads[i], plural(limits.threads[i]),
                        cpu_list(limits.team_cpus[i]).c_str());
}

// Each stepK against step1 of the same threads and depth, run minutes apart at most: on a shared
// machine only such ratios within one run mean anything.
void print_step_costs(const std::vector<StepCost>& step_costs) {
    if (step_costs.empty()) return;
    std::printf("\nverify step cost: the time of one decode step carrying K tokens over a one-token step's\n");
    std::printf("| %7s | %6s | %6s | %18s |\n", "threads", "depth", "K", "x step1");
    std::printf("| ------: | -----: | -----: | -----------------: |\n");
    for (const StepCost& cost : step_costs) {
        const auto one = std::find_if(step_costs.begin(), step_costs.end(), [&](const StepCost& c) {
            return c.threads == cost.threads && c.depth == cost.depth && c.tokens == 1;
        });
        if (one == step_costs.end()) continue;
        // Repetition r of stepK ran right after repetition r of step1 (interleaved), so each pair
        // saw the same load: the ratio is taken per pair.
        std::vector<double> ratios;
        for (std::size_t r = 0; r < std::min(cost.ns.size(), one->ns.size()); ++r) ratios.push_back(cost.ns[r] / one->ns[r]);
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.3f ± %.3f", mean(ratios), stddev(ratios));
        std::printf("| %7d | %6d | %6d | %19s |\n", cost.threads, cost.depth, cost.tokens, cell);
    }
}

}  // namespace

int main(int argc, char** argv) {
    smol::use_short_openmp_spin(argv);  // see smol/core/threads.hpp: no long spins on a busy machine
    Options options;
    if (const auto status = parse_options(argc, argv, options)) return *status;
    if (const auto status = resolve_default_model(options)) return *status;
    Report report;
    try {
        const MachineLimits limits = measure_limits(options);
        if (options.markdown()) print_table_header();
        for (const auto& path : options.models) bench_model(path, options, limits, report);
        if (options.markdown()) {
            std::printf("\n");
            for (const auto& note : report.footnotes) std::printf("%s\n", note.c_str());
            print_limits(limits, options);
            std::printf("peak RSS: %.2f GiB\n", double(smol::platform::peak_resident_bytes()) / double(1ull << 30));
            print_step_costs(report.step_costs);
        } else {
            std::printf("%s\n", report.rows.dump(2).c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-bench: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
