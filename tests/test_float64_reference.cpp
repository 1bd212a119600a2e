// smol's forward pass against a float64 reference transformer written with Eigen
// (float64_transformer.hpp): first the reference against llama.cpp's fixture logits, then smol
// against the reference where no fixture reaches: every compiled config that has a model file
// here, YaRN at other factors and original contexts, several sequences in one batch, and every
// KV cache type for keys and values, on seeded random prompts.

#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "float64_transformer.hpp"
#include "reference_data.hpp"
#include "smol/smol.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_float64_reference {

namespace {

using smol_test::Float64Options;
using smol_test::Float64Transformer;
using smol_test::RowMatrix;
using smol_test::nmse;
using smol_test::read_floats;

// The model files in tests/data, each run by the compiled config whose metadata it matches.
struct ModelFile {
    const char* dir;
    const char* file;
};
const ModelFile kModelFiles[] = {{"tiny-f32", "smollm3-tiny-f32.gguf"}, {"tiny", "smollm3-tiny-Q4_K_M.gguf"}};
const ModelFile kFloatFile = kModelFiles[0], kQuantizedFile = kModelFiles[1];

std::string model_path(const ModelFile& f) { return smol_test::test_data_path(std::string(f.dir) + "/" + f.file); }



// Seeded random tokens: prompts no fixture covers, the same on every run.
std::vector<std::int32_t> random_prompt(std::mt19937& rng, int n, int n_vocab) {
    std::uniform_int_distribution<std::int32_t> token(0, n_vocab - 1);
    std::vector<std::int32_t> out(static_cast<std::size_t>(n));
    for (auto& t : out) t = token(rng);
    return out;
}


// Worst and mean row NMSE over the rows compared so far.
struct RowErrors {
    double worst = 0.0, sum = 0.0;
    int rows = 0;
    void add(double e) {
        worst = std::max(worst, e);
        sum += e;
        ++rows;
    }
    double mean() const { return rows ? sum / rows : 0.0; }
};

// Rows of `ours` ([n_rows, n_vocab] floats) against rows first_row.. of the reference.
template <class T>
RowErrors compare_rows(const T* ours, const RowMatrix& reference, Eigen::Index first_row, int n_rows) {
    const int n_vocab = int(reference.cols());
    RowErrors errors;
    for (int r = 0; r < n_rows; ++r) errors.add(nmse(ours + std::size_t(r) * n_vocab, &reference(first_row + r, 0), n_vocab));
    return errors;
}

// One float64 reference per model file, built once (dequantizing the weights takes a moment).
const Float64Transformer& reference_for(const ModelFile& f) {
    static std::map<std::string, std::unique_ptr<Float64Transformer>> built;
    auto& slot = built[model_path(f)];
    if (!slot) slot = std::make_unique<Float64Transformer>(smol::gguf::File::open(model_path(f)));
    return *slot;
}

bool has_float_weights(const smol::gguf::File& file) {
    for (const auto& t : file.tensors())
        if (t.type != smol::TensorType::F32 && t.type != smol::TensorType::F16 && t.type != smol::TensorType::BF16)
            return false;
    return true;
}

// How far smol may be from the float64 pass (keys and values rounded as its cache stores them),
// by the file's weights, as row NMSE. Float weights keep every activation float32: measured
// worst 1.2e-7, mean 4e-8 (YaRN F = 8), 7e-8 / 1.4e-8 without YaRN, where the fixtures allow
// 1e-4 and a 5% attention-scale error gives 0.035. Quantized weights meet activations quantized
// to 8 bits (Q8_K, as llama.cpp does): measured worst 2.4e-4, mean 1.5e-4 to 2e-4, like
// llama.cpp's own 2.2e-4 from this reference; the fixture allows 2e-3 and wrong block
// unpacking lands above 1e-2.
struct Bounds {
    double worst, mean;
};
const Bounds kFloatWeightBounds{1e-6, 2e-7};
const Bounds kQuantizedWeightBounds{1e-3, 4e-4};

Bounds bounds_for(const smol::Model& model) {
    return has_float_weights(model.file()) ? kFloatWeightBounds : kQuantizedWeightBounds;
}

// The float model with a KV cache of these types against the reference with the same rounding.
// Measured worst / mean row NMSE over 96 random tokens: f16/f16 4.3e-8 / 1.5e-8; with Q8_0
// keys or values up to 6.7e-6 / 1.5e-6; with Q4_0 values 1.9e-5 / 2.0e-6; with Q4_0 keys
// 6.2e-4 / 1.7e-4, where a float32 key that lands on the other side of a 4-bit rounding step
// than the float64 one moves a whole step. Against exact keys and values the same logits are
// 1.3e-6 (f16), 7e-4 (Q8_0) and 0.07 to 0.19 (Q4_0) away.
Bounds cache_bounds(smol::KvCacheTypes types) {
    const auto either = [&](smol::KvType t) { return types.keys == t || types.values == t; };
    if (types.keys == smol::KvType::q4_0) return {5e-3, 1.5e-3};
    if (types.values == smol::KvType::q4_0) return {2e-4, 3e-5};
    if (either(smol::KvType::q8_0)) return {5e-5, 1.5e-5};
    return {4e-7, 1.5e-7};
}

// The reference rounding keys and values as `types` store them.
Float64Options rounded_as(smol::KvCacheTypes types, Float64Options options = {}) {
    options.round_cache = true;
    options.cache_types = types;
    return options;
}

// smol's logits for every token of `tokens`: in one batched call, and with the last
// kDecodedTail tokens decoded one at a time after the rest in one call (the decode path, at
// the late positions where it differs most; every token one at a time would cost far more).
constexpr int kDecodedTail = 32;
struct BothPaths {
    std::vector<float> batched, decoded;  // [n, n_vocab] each
};
BothPaths run_both_paths(smol::Model& model, const std::vector<std::int32_t>& tokens, smol::KvCacheTypes types) {
    const int n = int(tokens.size()), n_vocab = model.n_vocab();
    BothPaths out{std::vector<float>(std::size_t(n) * n_vocab), std::vector<float>(std::size_t(n) * n_vocab)};
    auto cache = model.make_cache(512, types);
    model.forward(cache, tokens, out.batched.data(), true);
    auto decode_cache = model.make_cache(512, types);
    const int prefix = std::max(0, n - kDecodedTail);
    if (prefix > 0) model.forward(decode_cache, std::span(tokens).first(std::size_t(prefix)), out.decoded.data(), true);
    for (int t = prefix; t < n; ++t)
        model.forward(decode_cache, std::span(tokens).subspan(std::size_t(t), 1), out.decoded.data() + std::size_t(t) * n_vocab,
                      false);
    return out;
}

// Both paths of smol against the reference rows, within `bounds`.
void check_against(smol::Model& model, const std::vector<std::int32_t>& tokens, smol::KvCacheTypes types,
                   const RowMatrix& reference, const Bounds& bounds, const std::string& label) {
    const BothPaths ours = run_both_paths(model, tokens, types);
    const int n = int(tokens.size());
    for (const bool batched : {true, false}) {
        const RowErrors e = compare_rows((batched ? ours.batched : ours.decoded).data(), reference, 0, n);
        const std::string path = label + (batched ? " batched" : " decoded");
        CHECK_MESSAGE(e.worst < bounds.worst, path, ": worst row NMSE ", e.worst, " over ", bounds.worst);
        CHECK_MESSAGE(e.mean() < bounds.mean, path, ": mean row NMSE ", e.mean(), " over ", bounds.mean);
        MESSAGE(path, ", ", n, " tokens: worst row NMSE ", e.worst, ", mean ", e.mean());
    }
}

}  // namespace

TEST_CASE("the float64 reference reproduces llama.cpp's logits on the float fixture") {
    // Both are exact up to rounding: the fixture README measured an independent float64
    // implementation at NMSE 1e-10 from llama.cpp's float32 one.
    const Float64Transformer& reference = reference_for(kFloatFile);
    const auto prompts = smol_test::read_prompts(smol_test::test_data_path(std::string(kFloatFile.dir) + "/prompts.txt"));
    REQUIRE(prompts.size() == 5);
    RowErrors all;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        CAPTURE(p);
        const auto expected = read_floats(smol_test::test_data_path("tiny-f32/ref-p" + std::to_string(p) + ".logits.f32"));
        const RowMatrix ours = reference.logits(prompts[p]);
        REQUIRE(expected.size() == std::size_t(ours.size()));
        for (Eigen::Index r = 0; r < ours.rows(); ++r) {
            const double e = nmse(&ours(r, 0), expected.data() + std::size_t(r) * ours.cols(), int(ours.cols()));
            all.add(e);
            CHECK_MESSAGE(e < 1e-8, "p", p, " row ", r, ": NMSE ", e);
        }
    }
    MESSAGE("float64 reference vs llama.cpp, tiny-f32: ", all.rows, " rows, worst NMSE ", all.worst, ", mean ", all.mean());
}

TEST_CASE("the float64 reference reproduces llama.cpp's YaRN logits") {
    const Float64Transformer& reference = reference_for(kFloatFile);
    const auto prompts = smol_test::read_prompts(smol_test::test_data_path(std::string(kFloatFile.dir) + "/prompts.txt"));
    Float64Options yarn;
    yarn.yarn_factor = 4.0;
    yarn.yarn_original_context = 64;
    RowErrors all;
    for (const int p : {3, 4}) {
        CAPTURE(p);
        const auto expected = read_floats(smol_test::test_data_path("yarn/ref-p" + std::to_string(p) + "-yarn4-orig64.logits.f32"));
        const RowMatrix ours = reference.logits(prompts[std::size_t(p)], yarn);
        REQUIRE(expected.size() == std::size_t(ours.size()));
        for (Eigen::Index r = 0; r < ours.rows(); ++r) {
            const double e = nmse(&ours(r, 0), expected.data() + std::size_t(r) * ours.cols(), int(ours.cols()));
            all.add(e);
            CHECK_MESSAGE(e < 1e-8, "p", p, " row ", r, ": NMSE ", e);
        }
    }
    MESSAGE("float64 reference vs llama.cpp, YaRN F = 4 over 64: ", all.rows, " rows, worst NMSE ", all.worst, ", mean ",
            all.mean());
}

TEST_CASE("the float64 reference on the Q4_K_M file's dequantized weights is near llama.cpp's logits") {
    // llama.cpp quantizes the activations to 8 bits for these weights; the fixture README puts
    // the float64 pass on the dequantized weights at NMSE 2.2e-4 from its logits.
    const Float64Transformer& reference = reference_for(kQuantizedFile);
    const auto prompts = smol_test::read_prompts(smol_test::test_data_path(std::string(kQuantizedFile.dir) + "/prompts.txt"));
    RowErrors all;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        CAPTURE(p);
        const auto expected = read_floats(smol_test::test_data_path("tiny/ref-p" + std::to_string(p) + ".logits.f32"));
        const RowMatrix ours = reference.logits(prompts[p]);
        REQUIRE(expected.size() == std::size_t(ours.size()));
        for (Eigen::Index r = 0; r < ours.rows(); ++r) {
            const double e = nmse(expected.data() + std::size_t(r) * ours.cols(), &ours(r, 0), int(ours.cols()));
            all.add(e);
            CHECK_MESSAGE(e < 2e-3, "p", p, " row ", r, ": NMSE ", e);
        }
    }
    MESSAGE("llama.cpp vs float64 reference, tiny Q4_K_M: ", all.rows, " rows, worst NMSE ", all.worst, ", mean ",
            all.mean());
}

TEST_CASE("every compiled config that has a model file here matches the float64 reference") {
    // Seeded random prompts, one past kAttentionChunk (256) so attention merges chunks; the
    // fixtures' own prompts are test_reference's. A config without a model file here (the 3B
    // model) cannot run and says so.
    omp_set_num_threads(2);
    std::mt19937 rng(20261127);
    int configs_run = 0;
    const auto run_config = [&]<class Config>(Config*) {
        const std::string name(Config::name);
        CAPTURE(name);
        const ModelFile* match = nullptr;
        for (const ModelFile& f : kModelFiles)
            if (!match && smol::config_mismatches<Config>(smol::gguf::File::open(model_path(f))).empty()) match = &f;
        if (!match) {
            MESSAGE(name, ": no model file in tests/data has its shape, not run");
            return;
        }
        ++configs_run;
        auto model = smol::load_as<Config>(smol::gguf::File::open(model_path(*match)));
        const Float64Transformer& reference = reference_for(*match);
        const smol::KvCacheTypes types = model->info().cache_types;
        for (const int length : {280, 7}) {
            const auto prompt = random_prompt(rng, length, model->n_vocab());
            check_against(*model, prompt, types, reference.logits(prompt, rounded_as(types)), bounds_for(*model), name);
        }
    };
    [&]<class... Configs>(smol::ConfigList<Configs...>) {
        (run_config(static_cast<Configs*>(nullptr)), ...);
    }(smol::CompiledConfigs{});
    CHECK(configs_run >= 2);  // the float and the quantized test models at least
}

TEST_CASE("YaRN at other factors and original contexts matches the float64 reference") {
    // tests/data/yarn has F = 4 over 64 only; these run prompts past smaller and larger original
    // contexts, on both test models.
    omp_set_num_threads(2);
    std::mt19937 rng(411);
    struct Case {
        const ModelFile* file;
        double factor;
        int original_context;
    };
    const Case cases[] = {{&kFloatFile, 2.0, 48}, {&kFloatFile, 4.0, 100}, {&kFloatFile, 8.0, 16}, {&kQuantizedFile, 2.0, 64}};
    for (const Case& c : cases) {
        const std::string label = std::string(c.file->dir) + " YaRN F = " + std::to_string(int(c.factor)) + " over " +
                                  std::to_string(c.original_context);
        CAPTURE(label);
        smol::LoadOptions options;
        options.rope_scaling.type = smol::RopeScaling::Type::yarn;
        options.rope_scaling.factor = c.factor;
        options.rope_scaling.original_context = c.original_context;
        auto model = smol::load_model(model_path(*c.file), options);
        REQUIRE(model->info().rope_scaling.yarn());
        const Float64Transformer& reference = reference_for(*c.file);
        Float64Options yarn;
        yarn.yarn_factor = c.factor;
        yarn.yarn_original_context = c.original_context;
        const auto prompt = random_prompt(rng, c.file == &kFloatFile ? 128 : 80, model->n_vocab());
        const smol::KvCacheTypes types = model->info().cache_types;
        const RowMatrix expected = reference.logits(prompt, rounded_as(types, yarn));
        // The scaling is what is checked: without it the reference is far off (row 31 of 32 shown).
        const std::span<const std::int32_t> start = std::span(prompt).first(32);
        const RowMatrix unscaled = reference.logits(start, rounded_as(types));
        CHECK(nmse(&unscaled(31, 0), &expected(31, 0), int(expected.cols())) > 1e-3);
        check_against(*model, prompt, types, expected, bounds_for(*model), label);
    }
}

TEST_CASE("several sequences of different lengths in one batch each match the float64 reference") {
    // Model::forward over several sequences is what the scheduler runs each step: prompts of
    // different lengths together, then a step where some sequences decode one token and others
    // continue with several.
    omp_set_num_threads(2);
    std::mt19937 rng(77);
    constexpr int kSequences = 4;
    const int first_lengths[kSequences] = {1, 6, 30, 100}, second_lengths[kSequences] = {3, 1, 12, 1};
    for (const ModelFile& f : kModelFiles) {
        const std::string dir = f.dir;
        CAPTURE(dir);
        auto model = smol::load_model(model_path(f));
        const Float64Transformer& reference = reference_for(f);
        const int n_vocab = model->n_vocab();
        const smol::KvCacheTypes types = model->info().cache_types;
        std::vector<std::vector<std::int32_t>> sequences;
        std::vector<RowMatrix> expected;
        std::vector<smol::KvCache> caches;
        for (int s = 0; s < kSequences; ++s) {
            sequences.push_back(random_prompt(rng, first_lengths[s] + second_lengths[s], n_vocab));
            expected.push_back(reference.logits(sequences.back(), rounded_as(types)));
            caches.push_back(model->make_cache(256));
        }
        std::vector<RowErrors> errors(kSequences);
        for (const int* lengths : {first_lengths, second_lengths}) {
            std::vector<smol::SequenceBatch> batch;
            std::size_t rows = 0;
            for (int s = 0; s < kSequences; ++s) {
                const auto done = std::size_t(caches[std::size_t(s)].size());
                batch.push_back({&caches[std::size_t(s)], std::span(sequences[std::size_t(s)]).subspan(done, std::size_t(lengths[s])),
                                 true});
                rows += std::size_t(lengths[s]);
            }
            std::vector<float> logits(rows * std::size_t(n_vocab));
            model->forward(batch, logits.data());
            const float* row = logits.data();  // each sequence's rows in batch order
            for (int s = 0; s < kSequences; ++s) {
                const int first = caches[std::size_t(s)].size() - lengths[s];
                const RowErrors e = compare_rows(row, expected[std::size_t(s)], first, lengths[s]);
                RowErrors& all = errors[std::size_t(s)];
                all.worst = std::max(all.worst, e.worst);
                all.sum += e.sum;
                all.rows += e.rows;
                row += std::size_t(lengths[s]) * n_vocab;
            }
        }
        const Bounds bounds = bounds_for(*model);
        for (int s = 0; s < kSequences; ++s) {
            CAPTURE(s);
            const RowErrors& e = errors[std::size_t(s)];
            CHECK(e.rows == int(sequences[std::size_t(s)].size()));
            CHECK(e.worst < bounds.worst);
            CHECK(e.mean() < bounds.mean);
            MESSAGE(dir, " sequence ", s, " (", e.rows, " tokens, in a batch of ", kSequences, "): worst row NMSE ", e.worst,
                    ", mean ", e.mean());
        }
    }
}

TEST_CASE("every KV cache type for keys and values matches the float64 reference with its rounding") {
    // The reference rounds keys and values as the cache stores them (and queries to 8 bits
    // against Q4_0 keys, as llama.cpp does), so the comparison stays tight for every type. Against
    // exact keys and values the same logits show the cache's own error, which for the quantized
    // types must be far larger, or the rounded comparison would prove nothing.
    omp_set_num_threads(2);
    std::mt19937 rng(5150);
    auto model = smol::load_model(model_path(kFloatFile));
    const Float64Transformer& reference = reference_for(kFloatFile);
    const auto prompt = random_prompt(rng, 96, model->n_vocab());
    const int n = int(prompt.size());
    const RowMatrix exact = reference.logits(prompt);
    const smol::KvType kTypes[] = {smol::KvType::f16, smol::KvType::q8_0, smol::KvType::q4_0};
    for (const smol::KvType keys : kTypes)
        for (const smol::KvType values : kTypes) {
            const smol::KvCacheTypes types{keys, values};
            const std::string label = std::string("cache ") + smol::kv_type_name(keys) + "/" + smol::kv_type_name(values);
            CAPTURE(label);
            const RowMatrix rounded = reference.logits(prompt, rounded_as(types));
            const BothPaths ours = run_both_paths(*model, prompt, types);
            for (const bool batched : {true, false}) {
                const float* logits = (batched ? ours.batched : ours.decoded).data();
                const RowErrors against_rounded = compare_rows(logits, rounded, 0, n);
                const RowErrors against_exact = compare_rows(logits, exact, 0, n);
                MESSAGE(label, batched ? " batched" : " decoded", ": worst / mean row NMSE ", against_rounded.worst, " / ",
                        against_rounded.mean(), " against the same rounding, ", against_exact.worst, " / ",
                        against_exact.mean(), " against exact keys and values");
                const Bounds bounds = cache_bounds(types);
                CHECK(against_rounded.worst < bounds.worst);
                CHECK(against_rounded.mean() < bounds.mean);
                // The rounding the reference applies is the cache's: it explains most of the error.
                CHECK(against_exact.mean() > 10.0 * against_rounded.mean());
            }
        }
}

TEST_CASE("Q5_1, IQ4_NL and IQ4_XS files: logits as near the exact ones as llama.cpp's") {
    // tests/data/tiny-quants: the float fixture quantized by llama-quantize --pure to each type,
    // with llama.cpp's p1 logits on it. The exact logits are the float64 pass on the file's
    // dequantized weights; what separates an engine from them is its int8 activations (Q8_0 for
    // Q5_1 and IQ4_NL here, where llama.cpp takes Q8_1 for Q5_1; Q8_K for IQ4_XS, as llama.cpp).
    // smol's worst row, batched and decoded, may be at most 1.5x llama.cpp's: the random model
    // amplifies every activation rounding, so two correct int8 engines differ by tens of percent
    // in this figure, while a wrong table entry, scale or bit lands orders of magnitude above.
    omp_set_num_threads(2);
    const auto prompts = smol_test::read_prompts(smol_test::test_data_path("tiny-f32/prompts.txt"));
    const auto& prompt = prompts.at(1);
    const int n = int(prompt.size());
    for (const std::string type : {"Q5_1", "IQ4_NL", "IQ4_XS"}) {
        CAPTURE(type);
        const std::string path = smol_test::test_data_path("tiny-quants/smollm3-tiny-" + type + ".gguf");
        const Float64Transformer reference(smol::gguf::File::open(path));
        const RowMatrix exact = reference.logits(prompt);
        const auto llama = read_floats(smol_test::test_data_path("tiny-quants/" + type + "/ref-p1.logits.f32"));
        REQUIRE(llama.size() == std::size_t(exact.size()));
        const RowErrors llama_errors = compare_rows(llama.data(), exact, 0, n);
        CHECK(llama_errors.worst < 2e-2);  // the fixture is the file's own logits
        auto model = smol::load_model(path);
        const BothPaths ours = run_both_paths(*model, prompt, model->info().cache_types);
        for (const bool batched : {true, false}) {
            const RowErrors e = compare_rows((batched ? ours.batched : ours.decoded).data(), exact, 0, n);
            MESSAGE(type, batched ? " batched" : " decoded", ": worst row NMSE ", e.worst, ", mean ", e.mean(),
                    "; llama.cpp worst ", llama_errors.worst, ", mean ", llama_errors.mean());
            CHECK(e.worst <= 1.5 * llama_errors.worst);
        }
    }
}

}  // namespace test_float64_reference
