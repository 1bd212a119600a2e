// Reference agreement: smol's logits and greedy tokens against llama.cpp's, on the two tiny
// SmolLM3-architecture fixtures (pass criteria from tests/data's README, i.e. the fixtures').

#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reference_data.hpp"
#include "smol/smol.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_reference {

namespace {

using smol_test::nmse;
using smol_test::read_floats;

struct Fixture {
    std::string dir;
    std::string model_file;
    double max_nmse;          // per row
    double argmax_margin;     // argmax must agree where the reference top-2 margin is at least this
    std::string config_name;  // the compiled config the registry must pick
};

const Fixture kFloat{"tiny-f32", "smollm3-tiny-f32.gguf", 1e-4, 0.1, "SmolLM3-tiny-256"};
const Fixture kQuantized{"tiny", "smollm3-tiny-Q4_K_M.gguf", 2e-3, 2.0, "SmolLM3-tiny-512"};

std::string path_of(const Fixture& f, const std::string& file) {
    return std::string(SMOL_TEST_DATA_DIR) + "/" + f.dir + "/" + file;
}



nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    return nlohmann::json::parse(in);
}


int argmax(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

double top2_margin(const float* x, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; ++i) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return double(a) - double(b);
}

// Checks rows of smol's logits against the reference rows with the fixture's criteria.
void check_rows(const Fixture& f, const std::vector<float>& ours, const std::vector<float>& ref, int n_rows, int n_vocab,
                const std::string& path_name) {
    double worst = 0;
    int argmax_checked = 0;
    for (int r = 0; r < n_rows; ++r) {
        const float* a = ours.data() + std::size_t(r) * n_vocab;
        const float* b = ref.data() + std::size_t(r) * n_vocab;
        const double e = nmse(a, b, n_vocab);
        worst = std::max(worst, e);
        CHECK_MESSAGE(e < f.max_nmse, path_name, " row ", r, ": NMSE ", e, " over the bound ", f.max_nmse);
        if (top2_margin(b, n_vocab) >= f.argmax_margin) {
            ++argmax_checked;
            CHECK_MESSAGE(argmax(a, n_vocab) == argmax(b, n_vocab), path_name, " row ", r, ": argmax differs");
        }
    }
    MESSAGE(f.dir, " ", path_name, ": ", n_rows, " rows, worst NMSE ", worst, ", argmax checked on ", argmax_checked);
}

// The prompt through the batched path and the one-token decode path, each checked against the
// reference rows; returns the batched logits ([n, n_vocab]) and leaves `cache` after the prompt.
std::vector<float> check_both_paths(smol::Model& model, smol::KvCache& cache, const std::vector<std::int32_t>& prompt,
                                    const std::vector<float>& ref, const Fixture& f, const std::string& label) {
    const int n = int(prompt.size()), n_vocab = model.n_vocab();
    REQUIRE(ref.size() == std::size_t(n) * n_vocab);
    std::vector<float> batched(std::size_t(n) * n_vocab);
    model.forward(cache, prompt, batched.data(), true);
    check_rows(f, batched, ref, n, n_vocab, label + "batched");
    auto step_cache = model.make_cache(cache.capacity());
    std::vector<float> stepped(std::size_t(n) * n_vocab);
    for (int t = 0; t < n; ++t)
        model.forward(step_cache, std::span(prompt).subspan(std::size_t(t), 1), stepped.data() + std::size_t(t) * n_vocab,
                      false);
    check_rows(f, stepped, ref, n, n_vocab, label + "one-token");
    return batched;
}

void check_fixture(const Fixture& f) {
    auto model = smol::load_model(path_of(f, f.model_file));
    CHECK(model->info().config_name == f.config_name);
    const int n_vocab = model->n_vocab();
    const auto prompts = smol_test::read_prompts(path_of(f, "prompts.txt"));
    REQUIRE(!prompts.empty());
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        const auto& prompt = prompts[p];
        CAPTURE(p);
        const auto ref = read_floats(path_of(f, "ref-p" + std::to_string(p) + ".logits.f32"));

        // 1-2. The whole prompt in one batched call, and one token at a time (the decode path).
        auto cache = model->make_cache(512);
        const std::vector<float> batched = check_both_paths(*model, cache, prompt, ref, f, "");

        // 3. Greedy decoding after the prompt, one token at a time.
        const auto greedy = read_json(path_of(f, "ref-p" + std::to_string(p) + ".greedy.json"));
        const auto expected = greedy["greedy"].get<std::vector<int>>();
        const int checked = greedy["checked"].get<int>();
        std::vector<float> last(static_cast<std::size_t>(n_vocab));
        std::copy(batched.end() - n_vocab, batched.end(), last.begin());
        std::vector<int> produced;
        for (int i = 0; i < checked; ++i) {
            const std::int32_t next = argmax(last.data(), n_vocab);
            produced.push_back(next);
            if (i + 1 < checked) model->forward(cache, std::span(&next, 1), last.data(), false);
        }
        CHECK(produced == std::vector<int>(expected.begin(), expected.begin() + checked));
        MESSAGE(f.dir, " p", p, ": ", checked, " greedy tokens checked");
    }
}

}  // namespace

TEST_CASE("YaRN fixture: logits past the original context match the reference") {
    // tiny-f32 with YaRN forced on: F = 4 over an original context of 64, so the 116- and
    // 232-token prompts run 2-4 times past it. Every row within the float fixture's NMSE bound,
    // batched and one token at a time.
    omp_set_num_threads(2);
    smol::LoadOptions options;
    options.rope_scaling.type = smol::RopeScaling::Type::yarn;
    options.rope_scaling.factor = 4.0;
    options.rope_scaling.original_context = 64;
    auto model = smol::load_model(path_of(kFloat, kFloat.model_file), options);
    REQUIRE(model->info().rope_scaling.yarn());
    CHECK(model->info().rope_scaling.attention_factor() == doctest::Approx(1.0 + 0.1 * std::log(4.0)));
    auto unscaled = smol::load_model(path_of(kFloat, kFloat.model_file));
    const int n_vocab = model->n_vocab();
    const auto prompts = smol_test::read_prompts(path_of(kFloat, "prompts.txt"));
    for (const int p : {3, 4}) {
        CAPTURE(p);
        const auto& prompt = prompts[std::size_t(p)];
        const int n = int(prompt.size());
        const auto ref = read_floats(smol_test::test_data_path("yarn/ref-p" + std::to_string(p) + "-yarn4-orig64.logits.f32"));
        auto cache = model->make_cache(256);
        check_both_paths(*model, cache, prompt, ref, kFloat, "yarn ");
        // Without YaRN the last row is far from the reference: the scaling is what matches.
        auto plain_cache = unscaled->make_cache(256);
        std::vector<float> plain(std::size_t(n) * n_vocab);
        unscaled->forward(plain_cache, prompt, plain.data(), true);
        CHECK(nmse(plain.data() + std::size_t(n - 1) * n_vocab, ref.data() + std::size_t(n - 1) * n_vocab, n_vocab) > 1e-2);
    }
}

TEST_CASE("YaRN turns on by itself only past the trained context, up to the compiled limit") {
    const smol::Hyperparameters hp = smol::SmolLM3_3B::hp;
    bool automatic = true;
    CHECK_FALSE(smol::resolve_rope_scaling(hp, {}, 65536, &automatic).yarn());
    CHECK_FALSE(automatic);
    const smol::RopeScaling doubled = smol::resolve_rope_scaling(hp, {}, 131072, &automatic);
    CHECK(doubled.yarn());
    CHECK(automatic);
    CHECK(doubled.factor == 2.0);
    CHECK(doubled.original_context == 65536);
    CHECK(smol::describe(doubled) == "YaRN, factor 2 over 65536 tokens");
    CHECK(smol::resolve_rope_scaling(hp, {}, 98304).factor == 1.5);
    // Past YaRN's limit nothing is turned on; make_cache then says what the limit is.
    CHECK_FALSE(smol::resolve_rope_scaling(hp, {}, 200000).yarn());
    // Asked for explicitly: the request wins, and bad values are errors.
    smol::RopeScalingRequest none;
    none.type = smol::RopeScaling::Type::none;
    CHECK_FALSE(smol::resolve_rope_scaling(hp, none, 131072).yarn());
    smol::RopeScalingRequest yarn;
    yarn.type = smol::RopeScaling::Type::yarn;
    CHECK(smol::resolve_rope_scaling(hp, yarn, 4096).factor == 1.0);
    yarn.factor = 0.5;
    CHECK_THROWS_WITH_AS(smol::resolve_rope_scaling(hp, yarn, 4096), doctest::Contains("--rope-scale"), smol::Error);

    auto model = smol::load_model(path_of(kFloat, kFloat.model_file));
    CHECK_THROWS_WITH_AS(model->make_cache(70000), doctest::Contains("YaRN reaches 131072"), smol::Error);
    smol::LoadOptions long_context;
    long_context.context = 70000;
    auto stretched = smol::load_model(path_of(kFloat, kFloat.model_file), long_context);
    CHECK(stretched->info().rope_scaling_automatic);
    CHECK(stretched->info().max_context == 131072);
    CHECK_THROWS_WITH_AS(stretched->make_cache(140000), doctest::Contains("at most 131072 with YaRN"), smol::Error);
}

TEST_CASE("float fixture: logits and greedy tokens match the reference") {
    omp_set_num_threads(2);
    check_fixture(kFloat);
}

TEST_CASE("Q4_K_M fixture: logits and greedy tokens match the reference") {
    omp_set_num_threads(2);
    check_fixture(kQuantized);
}

TEST_CASE("quantized KV caches stay within llama.cpp's error on the float fixture") {
    // Prompt p4 of tiny-f32 against its float32-cache reference logits. llama.cpp (the issue's
    // measurement, same prompt and reference) reaches worst/mean row NMSE f16 1.2e-6/-,
    // q8_0 1.8e-3/3.4e-4, q4_0 0.24/0.05; smol must be no worse, batched and one token at a time
    // (the mean gets 1% of slack: llama.cpp's own figure is rounded).
    struct Case {
        smol::KvCacheTypes types;
        double worst, mean;
    };
    const Case cases[] = {{{smol::KvType::f16, smol::KvType::f16}, 1.25e-6, 3.5e-7},
                          {{smol::KvType::q8_0, smol::KvType::q8_0}, 1.8e-3, 3.45e-4},
                          {{smol::KvType::q4_0, smol::KvType::q4_0}, 0.24, 0.0514}};
    omp_set_num_threads(2);
    auto model = smol::load_model(path_of(kFloat, kFloat.model_file));
    const auto prompt = smol_test::read_prompts(path_of(kFloat, "prompts.txt")).at(4);
    const int n = int(prompt.size()), n_vocab = model->n_vocab();
    const auto ref = read_floats(path_of(kFloat, "ref-p4.logits.f32"));
    REQUIRE(ref.size() == std::size_t(n) * n_vocab);
    for (const Case& c : cases) {
        const std::string type_name = smol::kv_type_name(c.types.keys);
        CAPTURE(type_name);
        auto cache = model->make_cache(512, c.types);
        CHECK(cache.types() == c.types);
        std::vector<float> batched(std::size_t(n) * n_vocab), stepped(batched.size());
        model->forward(cache, prompt, batched.data(), true);
        auto step_cache = model->make_cache(512, c.types);
        for (int t = 0; t < n; ++t)
            model->forward(step_cache, std::span(prompt).subspan(std::size_t(t), 1), stepped.data() + std::size_t(t) * n_vocab,
                           false);
        for (const auto* logits : {&batched, &stepped}) {
            double worst = 0.0, sum = 0.0;
            for (int r = 0; r < n; ++r) {
                const double e = nmse(logits->data() + std::size_t(r) * n_vocab, ref.data() + std::size_t(r) * n_vocab, n_vocab);
                worst = std::max(worst, e);
                sum += e;
            }
            MESSAGE("cache ", std::string(smol::kv_type_name(c.types.keys)), "/", std::string(smol::kv_type_name(c.types.values)),
                    logits == &batched ? " batched" : " one-token", ": worst row NMSE ", worst, ", mean ", sum / n);
            CHECK(worst < c.worst);
            CHECK(sum / n < c.mean);
        }
    }
}

TEST_CASE("several sequences in one batch give the same logits as each alone") {
    auto model = smol::load_model(path_of(kQuantized, kQuantized.model_file));
    const int n_vocab = model->n_vocab();
    const auto prompts = smol_test::read_prompts(path_of(kQuantized, "prompts.txt"));
    REQUIRE(prompts.size() >= 3);

    // Alone: the last logits of each prompt, then one more token each.
    std::vector<std::vector<float>> alone;
    for (int p = 0; p < 3; ++p) {
        auto cache = model->make_cache(256);
        std::vector<float> logits(static_cast<std::size_t>(n_vocab));
        model->forward(cache, prompts[std::size_t(p)], logits.data(), false);
        const std::int32_t next = argmax(logits.data(), n_vocab);
        model->forward(cache, std::span(&next, 1), logits.data(), false);
        alone.push_back(logits);
    }
    // Together: all prompts in one call, then one decode step for all three in one call.
    std::vector<smol::KvCache> caches;
    for (int p = 0; p < 3; ++p) caches.push_back(model->make_cache(256));
    std::vector<smol::SequenceBatch> batch;
    for (int p = 0; p < 3; ++p) batch.push_back({&caches[std::size_t(p)], prompts[std::size_t(p)], false});
    std::vector<float> logits(3 * std::size_t(n_vocab));
    model->forward(batch, logits.data());
    std::vector<std::int32_t> next(3);
    for (int p = 0; p < 3; ++p) {
        next[std::size_t(p)] = argmax(logits.data() + std::size_t(p) * n_vocab, n_vocab);
        batch[std::size_t(p)].tokens = std::span(&next[std::size_t(p)], 1);
    }
    model->forward(batch, logits.data());
    for (int p = 0; p < 3; ++p) {
        CAPTURE(p);
        CHECK(nmse(logits.data() + std::size_t(p) * n_vocab, alone[std::size_t(p)].data(), n_vocab) < 1e-8);
    }
}

TEST_CASE("weights regrouped for decode (the default) and as the file stores them give the same bits") {
    smol::LoadOptions as_stored;
    as_stored.repack = false;
    auto regrouped = smol::load_model(path_of(kQuantized, kQuantized.model_file));
    auto plain = smol::load_model(path_of(kQuantized, kQuantized.model_file), as_stored);
    const int n_vocab = plain->n_vocab();
    for (const auto& prompt : smol_test::read_prompts(path_of(kQuantized, "prompts.txt"))) {
        const int n = int(prompt.size());
        std::vector<float> a(std::size_t(n) * n_vocab), b(a.size());
        auto cache_a = regrouped->make_cache(512), cache_b = plain->make_cache(512);
        regrouped->forward(cache_a, prompt, a.data(), true);  // prompts: rows restored for the GEMMs
        plain->forward(cache_b, prompt, b.data(), true);
        REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        const std::int32_t next = argmax(a.data() + std::size_t(n - 1) * n_vocab, n_vocab);
        regrouped->forward(cache_a, std::span(&next, 1), a.data(), false);  // decode: the groups
        plain->forward(cache_b, std::span(&next, 1), b.data(), false);
        REQUIRE(std::memcmp(a.data(), b.data(), std::size_t(n_vocab) * sizeof(float)) == 0);
    }
}

TEST_CASE("prompts longer than the batch are processed in chunks with the same result") {
    smol::LoadOptions small_batches;
    small_batches.max_batch = 7;
    auto chunked = smol::load_model(path_of(kFloat, kFloat.model_file), small_batches);
    const auto prompts = smol_test::read_prompts(path_of(kFloat, "prompts.txt"));
    const auto& prompt = prompts.back();
    const int n = int(prompt.size());
    const int n_vocab = chunked->n_vocab();
    auto cache = chunked->make_cache(512);
    std::vector<float> logits(std::size_t(n) * n_vocab);
    chunked->forward(cache, prompt, logits.data(), true);
    const auto ref = read_floats(path_of(kFloat, "ref-p" + std::to_string(prompts.size() - 1) + ".logits.f32"));
    check_rows(kFloat, logits, ref, n, n_vocab, "chunked");
    CHECK(cache.size() == n);
}

TEST_CASE("the KV cache reports a full context clearly") {
    auto model = smol::load_model(path_of(kFloat, kFloat.model_file));
    auto cache = model->make_cache(4);
    std::vector<std::int32_t> tokens{1, 2, 3};
    std::vector<float> logits(static_cast<std::size_t>(model->n_vocab()));
    model->forward(cache, tokens, logits.data(), false);
    CHECK_THROWS_WITH_AS(model->forward(cache, tokens, logits.data(), false),
                         doctest::Contains("context full: 3 tokens are cached and 3 more do not fit in the context of 4"),
                         smol::Error);
    CHECK(cache.size() == 3);  // the failed call changed nothing
    CHECK_THROWS_WITH_AS(model->make_cache(1 << 20), doctest::Contains("supports at most 65536"), smol::Error);
    std::vector<std::int32_t> bad{4096};
    CHECK_THROWS_WITH_AS(model->forward(cache, bad, logits.data(), false), doctest::Contains("outside the vocabulary"),
                         smol::Error);
}

TEST_CASE("a file is loaded by the config that matches it, and a mismatch is explained") {
    auto file = smol::gguf::File::open(path_of(kFloat, kFloat.model_file));
    CHECK(smol::config_mismatches<smol::SmolLM3_TinyF32>(file).empty());
    const auto mismatches = smol::config_mismatches<smol::SmolLM3_3B>(file);
    CHECK(!mismatches.empty());
    CHECK_THROWS_WITH_AS(smol::load_as<smol::SmolLM3_3B>(std::move(file)),
                         doctest::Contains("smollm3.block_count: expected 36, found 8"), smol::Error);
    auto vocab_only = smol::gguf::File::open(std::string(SMOL_TEST_DATA_DIR) + "/vocab/smollm3-vocab.gguf");
    CHECK(smol::config_mismatches<smol::SmolLM3_3B>(vocab_only).empty());  // metadata matches ...
    CHECK_THROWS_WITH_AS(smol::load_model(std::move(vocab_only)),          // ... but it holds no weights
                         doctest::Contains("missing required tensor 'token_embd.weight'"), smol::Error);
}

TEST_CASE("loading with a progress callback pages the weights in and reports up to the whole size") {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
    smol::LoadOptions options;
    options.on_progress = [&](std::uint64_t done, std::uint64_t total) { reports.emplace_back(done, total); };
    auto model = smol::load_model(path_of(kQuantized, kQuantized.model_file), options);
    REQUIRE(!reports.empty());
    const auto file = smol::gguf::File::open(path_of(kQuantized, kQuantized.model_file));
    const std::uint64_t weights = file.file_size() - file.data_offset();
    CHECK(reports.back().first == weights);
    for (std::size_t i = 0; i < reports.size(); ++i) {
        CHECK(reports[i].second == weights);
        if (i) CHECK(reports[i].first >= reports[i - 1].first);
    }
    // The progress display: one line when not on a terminal.
    std::FILE* out = std::tmpfile();
    smol::LoadProgressPrinter printer("model.gguf", out);
    printer(0, 100);
    printer(100, 100);
    std::rewind(out);
    char line[256] = {};
    REQUIRE(std::fgets(line, sizeof line, out) != nullptr);
    CHECK(std::string(line).find("smol: loaded model.gguf") == 0);
    CHECK(std::fgets(line, sizeof line, out) == nullptr);
    std::fclose(out);
}

TEST_CASE("weight types quantized by llama.cpp: logits as llama.cpp's, within its own error of the float model") {
    // tests/data/tiny-quants/: the float fixture quantized by llama-quantize --pure to one type
    // per file, with llama.cpp's logits for p1 and its greedy tokens for p1 and p3. Per type:
    // (1) every row of smol's p1 logits no farther from llama.cpp's on the same file, batched and
    // one token at a time, than llama.cpp itself lands with float activations on the same
    // weights (the README's "float act." column): the random model amplifies every rounding
    // difference, so two int8-activation engines differ by about 1e-3 from the first row on;
    // (2) smol's distance to the float model's logits no larger than llama.cpp's own (the README's
    // max and mean row NMSE, with 5% slack for the rounding there); (3) the greedy tokens llama.cpp
    // decoded with a margin of at least 2.0.
    struct Case {
        const char* type;
        double float_activation_worst;   // llama.cpp with float activations against its int8 run
        double llama_worst, llama_mean;  // llama.cpp's p1 row NMSE against tiny-f32/ref-p1
    };
    const Case cases[] = {{"Q5_K", 8.81e-3, 9.766e-02, 6.003e-02}, {"Q4_0", 3.23e-3, 3.613e-01, 2.366e-01},
                          {"Q4_1", 4.04e-3, 3.411e-01, 2.031e-01}, {"Q5_0", 3.52e-3, 1.312e-01, 7.910e-02},
                          {"Q3_K", 7.38e-3, 1.052e+00, 6.566e-01}, {"Q2_K", 7.94e-3, 1.655e+00, 1.429e+00}};
    omp_set_num_threads(2);
    const auto prompts = smol_test::read_prompts(path_of(kFloat, "prompts.txt"));
    const auto float_ref = read_floats(path_of(kFloat, "ref-p1.logits.f32"));
    for (const Case& c : cases) {
        CAPTURE(c.type);
        const std::string dir = std::string("tiny-quants/") + c.type;
        const Fixture same_file{dir, "", c.float_activation_worst, 2.0, "SmolLM3-tiny-256"};
        auto model = smol::load_model(std::string(SMOL_TEST_DATA_DIR) + "/tiny-quants/smollm3-tiny-" + c.type + ".gguf");
        CHECK(model->info().config_name == "SmolLM3-tiny-256");
        const int n_vocab = model->n_vocab();
        const auto& prompt = prompts.at(1);
        const int n = int(prompt.size());
        auto cache = model->make_cache(256);
        const std::vector<float> logits = check_both_paths(
            *model, cache, prompt, read_floats(path_of(same_file, "ref-p1.logits.f32")), same_file, std::string(c.type) + " ");
        double worst = 0, mean = 0;
        for (int r = 0; r < n; ++r) {
            const double e = nmse(logits.data() + std::size_t(r) * n_vocab, float_ref.data() + std::size_t(r) * n_vocab, n_vocab);
            worst = std::max(worst, e);
            mean += e / n;
        }
        MESSAGE(std::string(c.type), " against the float model: worst row NMSE ", worst, " (llama.cpp ", c.llama_worst, "), mean ", mean,
                " (llama.cpp ", c.llama_mean, ")");
        CHECK(worst <= c.llama_worst * 1.05);
        CHECK(mean <= c.llama_mean * 1.05);
        for (const int p : {1, 3}) {
            CAPTURE(p);
            const auto greedy = read_json(path_of(same_file, "ref-p" + std::to_string(p) + ".greedy.json"));
            const auto expected = greedy["greedy"].get<std::vector<int>>();
            const int checked = greedy["checked"].get<int>();
            auto greedy_cache = model->make_cache(256);
            const auto& tokens = prompts.at(std::size_t(p));
            std::vector<float> all(tokens.size() * std::size_t(n_vocab));
            model->forward(greedy_cache, tokens, all.data(), true);
            std::vector<float> last(all.end() - n_vocab, all.end());
            std::vector<int> produced;
            for (int i = 0; i < checked; ++i) {
                const std::int32_t next = argmax(last.data(), n_vocab);
                produced.push_back(next);
                if (i + 1 < checked) model->forward(greedy_cache, std::span(&next, 1), last.data(), false);
            }
            CHECK(produced == std::vector<int>(expected.begin(), expected.begin() + checked));
        }
    }
}

}  // namespace test_reference
