// smol-synth's library (tools/model_synthesis.hpp) and the built tools smol-synth, smol-inspect,
// smol-bench and smol-tokenizer-bench: the Q4_K_M layout against llama.cpp's tiny fixture and
// the published 3B type counts, synthesized files loading and running, the tokenizer.json
// export, and the tools' exit codes and output.

#include <doctest/doctest.h>

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_synthesis.hpp"  // tools/
#include "smol/smol.hpp"
#include "smol/text/tokenizer.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_tools {

namespace fs = std::filesystem;
using smol::TensorType;
namespace synth = smol::synth;

namespace {

const fs::path kData = SMOL_TEST_DATA_DIR;
const fs::path kBin = SMOL_BIN_DIR;
const fs::path kTinyFixture = kData / "tiny" / "smollm3-tiny-Q4_K_M.gguf";

// A scratch directory removed when the test program exits.
const fs::path& scratch_dir() {
    struct Dir {
        fs::path path = fs::temp_directory_path() / ("smol-test-tools-" + std::to_string(::getpid()));
        Dir() { fs::create_directories(path); }
        ~Dir() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    };
    static Dir dir;
    return dir.path;
}

// The tiny preset synthesized once (tokenizer from the tiny fixture) and shared by the tests.
const fs::path& synthesized_tiny() {
    static const fs::path path = [] {
        synth::Options options;
        options.shape = synth::preset("tiny");
        options.seed = 7;
        options.vocab_files = {kTinyFixture};
        options.require_vocab_file = true;
        const fs::path out = scratch_dir() / "tiny-synth.gguf";
        synth::write_model(out, options);
        return out;
    }();
    return path;
}

// A small shape that matches no compiled config, with a synthesized vocabulary.
synth::Shape small_custom_shape() {
    synth::Shape s;
    s.n_layers = 2;
    s.d_model = 256;
    s.d_ffn = 512;
    s.n_heads = 2;
    s.n_kv_heads = 1;
    s.head_dim = 128;
    s.n_vocab = 300;
    return s;
}

std::vector<char> read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct RunResult {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

// Runs one of the built tools, after `env` (words for env(1), e.g. "-u NAME NAME=value") where
// given; fails the test clearly when it was not built.
RunResult run_tool(const std::string& tool, const std::string& args, const std::string& env = "") {
    const fs::path exe = kBin / tool;
    if (!fs::exists(exe))
        FAIL("tool not built: ", exe.string(), " (build it: cmake --build <build dir> --target ", tool, ")");
    const std::string command = (env.empty() ? "" : "env " + env + " ") + "'" + exe.string() + "' " + args + " 2>&1";
    RunResult result;
    std::FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Loads a model file and runs a few tokens: every logit finite, and not all zero (not a file of
// zeros).
void check_loads_and_runs(const fs::path& path, const std::vector<std::int32_t>& tokens) {
    auto model = smol::load_model(path);
    auto cache = model->make_cache(64);
    std::vector<float> logits(tokens.size() * std::size_t(model->n_vocab()));
    model->forward(cache, tokens, logits.data(), /*all_logits=*/true);
    double sum_sq = 0;
    bool finite = true;
    for (float x : logits) {
        finite = finite && std::isfinite(x);
        sum_sq += double(x) * x;
    }
    CHECK(finite);
    CHECK(sum_sq > 0);
}

std::map<TensorType, int> count_types(const std::vector<synth::PlannedTensor>& plan) {
    std::map<TensorType, int> counts;
    for (const auto& t : plan) counts[t.type] += 1;
    return counts;
}

}  // namespace

TEST_CASE("use_more_bits picks llama.cpp's Q4_K_M layers for 36 and 8 layers") {
    // The layer lists stated for the released 3B file and the tiny fixture.
    const std::vector<int> expected_36 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
    const std::vector<int> expected_8 = {0, 3, 6, 7};
    std::vector<int> got_36, got_8;
    for (int il = 0; il < 36; ++il)
        if (synth::use_more_bits(il, 36)) got_36.push_back(il);
    for (int il = 0; il < 8; ++il)
        if (synth::use_more_bits(il, 8)) got_8.push_back(il);
    CHECK(got_36 == expected_36);
    CHECK(got_8 == expected_8);
}

TEST_CASE("the tiny preset's plan is the llama.cpp fixture's tensor table: names, order, types, shapes") {
    const auto plan = synth::plan_tensors(synth::preset("tiny"));
    const auto fixture = smol::gguf::File::open(kTinyFixture);
    REQUIRE(plan.size() == fixture.tensors().size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const auto& want = fixture.tensors()[i];
        CAPTURE(want.name);
        CHECK(plan[i].name == want.name);
        CHECK(plan[i].type == want.type);
        CHECK(plan[i].shape == want.shape);
        CHECK(plan[i].n_bytes() == want.n_bytes);
    }
    const auto counts = count_types(plan);
    CHECK(counts.at(TensorType::F32) == 17);  // 2 norms x 8 layers + output_norm
    CHECK(counts.at(TensorType::Q6_K) == 9);  // token_embd + (attn_v, ffn_down) x layers 0, 3, 6, 7
    CHECK(counts.at(TensorType::Q4_K) == 48);
}

TEST_CASE("the 3B plan has SmolLM3-3B's Q4_K_M tensor list and size") {
    const synth::Shape s = synth::preset("3b");
    const auto plan = synth::plan_tensors(s);
    CHECK(plan.size() == 326);
    const auto counts = count_types(plan);
    CHECK(counts.at(TensorType::Q4_K) == 216);
    CHECK(counts.at(TensorType::Q6_K) == 37);
    CHECK(counts.at(TensorType::F32) == 73);
    CHECK(counts.size() == 3);

    std::map<std::string, const synth::PlannedTensor*> by_name;
    for (const auto& t : plan) by_name[t.name] = &t;
    REQUIRE(by_name.count("token_embd.weight"));
    CHECK(by_name["token_embd.weight"]->type == TensorType::Q6_K);
    CHECK(by_name["token_embd.weight"]->shape == std::vector<std::int64_t>{2048, 128256});
    CHECK(by_name.count("output.weight") == 0);  // tied embeddings
    CHECK(by_name["blk.30.attn_v.weight"]->type == TensorType::Q6_K);
    CHECK(by_name["blk.29.ffn_down.weight"]->type == TensorType::Q4_K);
    CHECK(by_name["blk.35.ffn_down.weight"]->shape == std::vector<std::int64_t>{11008, 2048});
    CHECK(by_name["blk.7.attn_k.weight"]->shape == std::vector<std::int64_t>{2048, 512});

    // Bytes from the block sizes (Q4_K 144 and Q6_K 210 per 256 weights), 18 layers with Q6_K
    // attn_v and ffn_down: the tensor data of the released Q4_K_M file.
    const std::uint64_t d = 2048, f = 11008, kv = 512, vocab = 128256;
    auto q4 = [](std::uint64_t n) { return n / 256 * 144; };
    auto q6 = [](std::uint64_t n) { return n / 256 * 210; };
    const std::uint64_t per_layer_common = q4(d * d) * 2 + q4(d * kv) + q4(d * f) * 2 + 2 * 4 * d;
    const std::uint64_t expected = q6(d * vocab) + 4 * d + 36 * per_layer_common + 18 * (q6(d * kv) + q6(f * d)) +
                                   18 * (q4(d * kv) + q4(f * d));
    std::uint64_t bytes = 0, params = 0;
    for (const auto& t : plan) {
        bytes += t.n_bytes();
        params += t.n_elements();
    }
    CHECK(bytes == expected);
    CHECK(bytes == 1907462144);  // ~1.915 GB with the tokenizer metadata
    CHECK(params == 3075098624);  // SmolLM3-3B's published 3.08 B
}

TEST_CASE("a pure plan puts every matrix in one type, and such tiny files load and run") {
    const auto plan = synth::plan_tensors(synth::preset("tiny"), TensorType::Q3_K);
    const auto counts = count_types(plan);
    CHECK(counts.at(TensorType::Q3_K) == 57);  // token_embd and 7 matrices x 8 layers
    CHECK(counts.at(TensorType::F32) == 17);   // the norms
    CHECK(counts.size() == 2);
    CHECK_THROWS_WITH_AS(synth::plan_tensors(synth::preset("tiny"), TensorType::Q8_1),
                         doctest::Contains("matrices of type Q8_1 are not supported"), smol::Error);
    for (const TensorType type : {TensorType::Q5_K, TensorType::Q3_K, TensorType::Q2_K}) {
        CAPTURE(smol::type_name(type));
        synth::Options options;
        options.shape = synth::preset("tiny");
        options.seed = 11;
        options.vocab_files = {kTinyFixture};
        options.require_vocab_file = true;
        options.matrix_type = type;
        const fs::path out = scratch_dir() / ("tiny-" + std::string(smol::type_name(type)) + ".gguf");
        synth::write_model(out, options);
        const auto file = smol::gguf::File::open(out);
        CHECK(file.get_int("general.file_type") == synth::llama_file_type(type));
        CHECK(file.tensor("token_embd.weight").type == type);
        CHECK(file.tensor("blk.7.ffn_down.weight").type == type);
        check_loads_and_runs(out, {1, 500, 4078});
    }
}

TEST_CASE("shapes the K-quants cannot hold are refused with the reason") {
    synth::Shape s = small_custom_shape();
    s.d_model = 320;
    CHECK_THROWS_WITH_AS(synth::plan_tensors(s), doctest::Contains("multiple of 256"), smol::Error);
    s = small_custom_shape();
    s.n_kv_heads = 3;
    CHECK_THROWS_WITH_AS(synth::plan_tensors(s), doctest::Contains("divide evenly"), smol::Error);
    CHECK_THROWS_AS(synth::preset("7b"), smol::Error);
}

TEST_CASE("a synthesized tiny model has the fixture's layout and tokenizer, loads and runs") {
    const auto file = smol::gguf::File::open(synthesized_tiny());
    const auto fixture = smol::gguf::File::open(kTinyFixture);
    REQUIRE(file.tensors().size() == fixture.tensors().size());
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
        CHECK(file.tensors()[i].name == fixture.tensors()[i].name);
        CHECK(file.tensors()[i].type == fixture.tensors()[i].type);
        CHECK(file.tensors()[i].shape == fixture.tensors()[i].shape);
    }
    // The tokenizer keys are copied value for value.
    int tokenizer_keys = 0;
    for (const auto& [key, value] : fixture.metadata()) {
        if (!key.starts_with("tokenizer.")) continue;
        ++tokenizer_keys;
        CAPTURE(key);
        const auto* copy = file.find(key);
        REQUIRE(copy != nullptr);
        CHECK(copy->describe_type() == value.describe_type());
        if (value.is_string()) CHECK(*copy->as_string() == *value.as_string());
        else if (value.is_array() && value.element_type() == smol::gguf::ValueType::String) CHECK(copy->strings() == value.strings());
        else if (value.is_array()) CHECK(copy->ints() == value.ints());
        else CHECK(copy->as_int() == value.as_int());
    }
    CHECK(tokenizer_keys >= 7);
    CHECK(file.get_int("general.file_type") == 15);
    CHECK(smol::config_mismatches<smol::SmolLM3_TinyQ4>(file).empty());

    CHECK(smol::load_model(synthesized_tiny())->info().config_name == "SmolLM3-tiny-512");
    check_loads_and_runs(synthesized_tiny(), {1, 500, 4078, 17, 4095});
}

TEST_CASE("smol-synth --type makes every matrix one type, as llama-quantize --pure, and the file runs") {
    for (const TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_1, TensorType::Q5_1, TensorType::Q8_0}) {
        CAPTURE(smol::type_name(type));
        const auto counts = count_types(synth::plan_tensors(synth::preset("tiny"), type));
        CHECK(counts.at(type) == 57);  // token_embd and 7 matrices x 8 layers
        CHECK(counts.at(TensorType::F32) == 17);
        CHECK(counts.size() == 2);
    }
    CHECK(synth::llama_file_type({}) == 15);
    CHECK(synth::llama_file_type(TensorType::Q5_0) == 8);
    CHECK(synth::llama_file_type(TensorType::Q5_1) == 9);
    // smol runs IQ4_NL files but has no quantizer to write one.
    CHECK_THROWS_WITH_AS(synth::plan_tensors(synth::preset("tiny"), TensorType::IQ4_NL),
                         doctest::Contains("matrices of type IQ4_NL are not supported"), smol::Error);
    CHECK_THROWS_WITH_AS(synth::plan_tensors(synth::preset("tiny"), TensorType::I8),
                         doctest::Contains("matrices of type I8 are not supported"), smol::Error);

    for (const auto& [name, type, file_type] : {std::tuple{"q4_1", TensorType::Q4_1, 3}, std::tuple{"q5_1", TensorType::Q5_1, 9}}) {
        CAPTURE(name);
        const fs::path out = scratch_dir() / ("tiny-" + std::string(name) + ".gguf");
        const auto made = run_tool("smol-synth", "-o " + quoted(out) + " --preset tiny --type " + name + " --seed 3 -t 1");
        REQUIRE(made.exit_code == 0);
        const auto file = smol::gguf::File::open(out);
        CHECK(file.get_int("general.file_type") == file_type);
        for (const auto& t : file.tensors()) {
            CAPTURE(t.name);
            CHECK(t.type == (t.shape.size() == 2 ? type : TensorType::F32));
        }
        check_loads_and_runs(out, {1, 500, 4078});
    }
    const auto iq4 = run_tool("smol-synth", "-o " + quoted(scratch_dir() / "z.gguf") + " --preset tiny --type IQ4_NL");
    CHECK(iq4.exit_code == 2);

    const auto refused = run_tool("smol-synth", "-o " + quoted(scratch_dir() / "y.gguf") + " --preset tiny --type Q9_9");
    CHECK(refused.exit_code == 2);  // a usage mistake
    CHECK(refused.output.find("--type: expected Q4_K_M or a weight type (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0, "
                              "Q4_1, Q5_1, F32, F16, BF16), found 'Q9_9'") != std::string::npos);
}

TEST_CASE("synthesized weights: std 0.02 around 0, norms around 1, after quantization") {
    const auto file = smol::gguf::File::open(synthesized_tiny());
    auto stats = [&](const std::string& name) {
        const auto& t = file.tensor(name);
        std::vector<float> row(static_cast<std::size_t>(t.shape[0]));
        double sum = 0, sum_sq = 0;
        for (std::int64_t r = 0; r < t.rows(); ++r) {
            smol::dequantize_row(t.type, t.data + std::uint64_t(r) * t.row_bytes(), row.data(), t.shape[0]);
            for (float x : row) {
                sum += x;
                sum_sq += double(x) * x;
            }
        }
        const double n = double(t.n_elements);
        const double mean = sum / n;
        return std::pair{mean, std::sqrt(sum_sq / n - mean * mean)};
    };
    for (const char* name : {"blk.1.ffn_up.weight", "blk.0.ffn_down.weight", "token_embd.weight"}) {
        CAPTURE(name);
        const auto [mean, std] = stats(name);
        CHECK(std::abs(mean) < 1e-3);
        CHECK(std > 0.018);
        CHECK(std < 0.022);
    }
    const auto [norm_mean, norm_std] = stats("blk.2.attn_norm.weight");
    CHECK(norm_mean == doctest::Approx(1.0).epsilon(0.01));
    CHECK(norm_std < 0.03);
    CHECK(norm_std > 0.01);
}

TEST_CASE("synthesis depends on the seed only, not on the thread count") {
    synth::Options options;
    options.shape = small_custom_shape();
    options.seed = 99;
    const fs::path one = scratch_dir() / "seed99-1thread.gguf";
    const fs::path two = scratch_dir() / "seed99-2threads.gguf";
    const fs::path other = scratch_dir() / "seed100.gguf";
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    synth::write_model(one, options);
    omp_set_num_threads(2);
    std::size_t progress_calls = 0;
    synth::Progress last;
    synth::write_model(two, options, [&](const synth::Progress& p) {
        ++progress_calls;
        last = p;
    });
    options.seed = 100;
    synth::write_model(other, options);
    omp_set_num_threads(threads);
    CHECK(read_bytes(one) == read_bytes(two));
    CHECK(read_bytes(one) != read_bytes(other));
    CHECK(progress_calls == synth::plan_tensors(small_custom_shape()).size());
    CHECK(last.bytes_done == last.bytes_total);
    CHECK(last.tensors_done == last.tensors_total);
}

TEST_CASE("a custom size with a synthesized vocabulary is a valid file that no config matches") {
    synth::Options options;
    options.shape = small_custom_shape();
    options.vocab_files = {kData / "vocab" / "smollm3-vocab.gguf"};  // 128256 tokens: does not fit 300
    const fs::path out = scratch_dir() / "custom.gguf";
    const auto result = synth::write_model(out, options);
    CHECK(result.vocab.file.empty());
    CHECK(result.vocab.note.find("vocabulary of 128256 tokens, expected 300") != std::string::npos);
    CHECK(result.vocab.note.find("synthesized byte-level") != std::string::npos);
    CHECK(result.n_tensors == 2 * 9 + 2);
    CHECK(result.file_bytes == fs::file_size(out));

    const auto file = smol::gguf::File::open(out);
    CHECK(smol::match_report(file).starts_with("no compiled config matches"));
    CHECK_THROWS_WITH_AS(smol::load_model(out), doctest::Contains("no compiled model config matches"), smol::Error);
    // The byte-level vocabulary is usable: text becomes one token per byte.
    const auto tokenizer = smol::text::Tokenizer::from_gguf(file);
    CHECK(tokenizer.n_vocab() == 300);
    const auto ids = tokenizer.encode("hi <|im_end|>", /*parse_special=*/true);
    REQUIRE(ids.size() == 4);
    CHECK(tokenizer.decode(ids, /*show_control=*/true) == "hi <|im_end|>");
    CHECK(tokenizer.token_piece(ids[3]) == "<|im_end|>");

    // A vocab file given explicitly must fit.
    options.require_vocab_file = true;
    CHECK_THROWS_WITH_AS(synth::write_model(scratch_dir() / "refused.gguf", options),
                         doctest::Contains("expected 300"), smol::Error);
}

TEST_CASE("smol-inspect describes a fixture and rejects broken files with exit code 1") {
    const auto ok = run_tool("smol-inspect", quoted(kTinyFixture));
    CHECK(ok.exit_code == 0);
    for (const char* line : {"architecture: smollm3", "tensors: 74", "tokenizer.ggml.tokens", "array of 4096 string",
                             "blk.7.ffn_down.weight", "Q6_K", "bits per weight:", "config: matches SmolLM3-tiny-512",
                             "smollm3.block_count: expected 36, found 8"}) {
        CAPTURE(line);
        CHECK(ok.output.find(line) != std::string::npos);
    }
    CHECK(ok.output.find("... (5493 bytes)") != std::string::npos);  // the chat template, truncated

    const auto brief = run_tool("smol-inspect", "--no-tensors " + quoted(kTinyFixture));
    CHECK(brief.exit_code == 0);
    CHECK(brief.output.find("blk.7.ffn_down.weight") == std::string::npos);

    const fs::path corrupt = scratch_dir() / "corrupt.gguf";
    std::ofstream(corrupt, std::ios::binary) << "NOPE this is not a model file";
    const auto bad = run_tool("smol-inspect", quoted(corrupt));
    CHECK(bad.exit_code == 1);
    CHECK(bad.output.find("not a GGUF file") != std::string::npos);

    // Cut inside the tensor table: the reader's truncation message comes through.
    const auto bytes = read_bytes(kTinyFixture);
    const fs::path truncated = scratch_dir() / "truncated.gguf";
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), 150000);
    const auto cut = run_tool("smol-inspect", quoted(truncated));
    CHECK(cut.exit_code == 1);
    CHECK(cut.output.find("truncated") != std::string::npos);

    const auto missing = run_tool("smol-inspect", quoted(scratch_dir() / "no-such-file.gguf"));
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("cannot open") != std::string::npos);
}

TEST_CASE("smol-inspect lists a file of every ggml type and names the types smol cannot run") {
    // One 256 x 2 tensor of each type ggml defines (256 is a whole number of blocks of every
    // type), zero bytes: the reader must know every type's geometry, and smol-inspect must say
    // which types have no kernel instead of failing to open the file.
    smol::gguf::Writer writer;
    writer.set_string("general.architecture", "smollm3");
    std::vector<TensorType> types;
    for (std::uint32_t id = 0; id < 64; ++id)
        if (const auto traits = smol::tensor_type_traits(id)) types.push_back(traits->type);
    CHECK(types.size() == 35);  // ggml.h's enum, less the ids it removed
    for (const TensorType type : types) {
        const auto traits = smol::traits_of(type);
        writer.add_tensor("t." + std::string(traits.name), type, {256, 2},
                          std::vector<std::uint8_t>(2 * 256 / traits.block_elements * traits.block_bytes));
    }
    const fs::path path = scratch_dir() / "every-type.gguf";
    writer.write(path);
    const auto listed = run_tool("smol-inspect", quoted(path));
    CHECK(listed.exit_code == 0);
    for (const char* line : {"t.IQ2_XXS", "t.TQ1_0", "t.MXFP4", "t.NVFP4", "t.F64", "t.I8", "tensors: 35",
                             "types smol cannot run: Q8_1, Q8_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, I8, I16, "
                             "I32, I64, F64, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0 (it runs "}) {
        CAPTURE(line);
        CHECK(listed.output.find(line) != std::string::npos);
    }
    for (const TensorType type : types) {
        const std::string name(smol::type_name(type));
        CAPTURE(name);
        const std::size_t row = listed.output.find("\n  " + name + " ");
        REQUIRE(row != std::string::npos);
        const std::string line = listed.output.substr(row + 1, listed.output.find('\n', row + 1) - row - 1);
        CHECK((line.find("  runs") != std::string::npos) == smol::is_weight_type(type));
    }
}

TEST_CASE("smol-inspect --hf-tokenizer writes the vocabulary as Llama 3's tokenizer.json") {
    const fs::path vocab = kData / "vocab" / "smollm3-vocab.gguf";
    const fs::path full = scratch_dir() / "tokenizer.json", plain = scratch_dir() / "tokenizer-plain.json";
    REQUIRE(run_tool("smol-inspect", quoted(vocab) + " --hf-tokenizer " + quoted(full)).exit_code == 0);
    REQUIRE(run_tool("smol-inspect", quoted(vocab) + " --hf-tokenizer " + quoted(plain) + " --no-control-tokens").exit_code == 0);
    const auto read_json = [](const fs::path& path) {
        std::ifstream in(path);
        return nlohmann::json::parse(in);
    };
    const nlohmann::json with_control = read_json(full), without_control = read_json(plain);
    const nlohmann::json& model = with_control.at("model");
    CHECK(model.at("type") == "BPE");
    CHECK(model.at("ignore_merges") == true);
    CHECK(model.at("vocab").size() == 128000);
    CHECK(model.at("vocab").at("\xC4\xA0Hello") == 22691);  // "ĠHello"
    CHECK(model.at("merges").size() == 280147);
    CHECK(with_control.at("added_tokens").size() == 256);
    const auto find_added = [](const nlohmann::json& tokenizer, const std::string& content) -> const nlohmann::json* {
        for (const auto& token : tokenizer.at("added_tokens"))
            if (token.at("content") == content) return &token;
        return nullptr;
    };
    const nlohmann::json* im_start = find_added(with_control, "<|im_start|>");
    REQUIRE(im_start != nullptr);
    CHECK(im_start->at("id") == 128011);
    CHECK(im_start->at("special") == true);
    const nlohmann::json* think = find_added(with_control, "<think>");
    REQUIRE(think != nullptr);
    CHECK(think->at("special") == false);
    // Without control tokens their text is plain text; user-defined tokens such as <think> stay.
    CHECK(find_added(without_control, "<|im_start|>") == nullptr);
    CHECK(find_added(without_control, "<think>") != nullptr);
    CHECK(without_control.at("model") == model);

    const auto no_path = run_tool("smol-inspect", quoted(vocab) + " --hf-tokenizer");
    CHECK(no_path.exit_code == 2);
    CHECK(no_path.output.find("--hf-tokenizer needs an output path") != std::string::npos);
}

TEST_CASE("smol-tokenizer-bench reports the tokens and speed of encoding a file") {
    const fs::path vocab = kData / "vocab" / "smollm3-vocab.gguf";
    const fs::path text_path = scratch_dir() / "bench-text.txt";
    std::string text;
    for (int i = 0; i < 200; ++i) text += "Xin chào Việt Nam! Hello, world. Привет, мир 12345\n";
    std::ofstream(text_path, std::ios::binary) << text;
    const auto result = run_tool("smol-tokenizer-bench", "-m " + quoted(vocab) + " -f " + quoted(text_path) + " -r 2 -o json");
    REQUIRE(result.exit_code == 0);
    const auto json = nlohmann::json::parse(result.output);
    const auto tokenizer = smol::text::Tokenizer::from_gguf(smol::gguf::File::open(vocab));
    CHECK(json.at("bytes") == text.size());
    CHECK(json.at("tokens") == tokenizer.encode(text, false).size());
    CHECK(json.at("mb_per_s").get<double>() > 0);
    CHECK(json.at("tokens_per_s").get<double>() ==
          doctest::Approx(json.at("tokens").get<double>() / json.at("seconds").get<double>()));
    CHECK(json.at("repetitions") == 2);

    const auto markdown = run_tool("smol-tokenizer-bench", "-m " + quoted(vocab) + " -f " + quoted(text_path) + " -r 1");
    CHECK(markdown.exit_code == 0);
    CHECK(markdown.output.find("| MB/s | tokens/s |") != std::string::npos);

    const auto missing = run_tool("smol-tokenizer-bench", "-m " + quoted(vocab) + " -f " + quoted(scratch_dir() / "none.txt"));
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("cannot open text file") != std::string::npos);
    const auto bad_count = run_tool("smol-tokenizer-bench", "-m " + quoted(vocab) + " -f " + quoted(text_path) + " -r 0");
    CHECK(bad_count.exit_code == 2);
    CHECK(bad_count.output.find("-r: expected") != std::string::npos);
}

TEST_CASE("smol-synth writes a custom size, and smol-inspect says why no config matches it") {
    const fs::path out = scratch_dir() / "cli-custom.gguf";
    const auto made = run_tool("smol-synth", "-o " + quoted(out) +
                                                 " --preset tiny --layers 2 --dim 256 --ffn 512 --heads 2 --kv-heads 1"
                                                 " --vocab 300 --seed 5 -t 1");
    CHECK(made.exit_code == 0);
    CHECK(made.output.find("synthesized byte-level") != std::string::npos);
    REQUIRE(fs::exists(out));
    const auto shown = run_tool("smol-inspect", quoted(out));
    CHECK(shown.exit_code == 0);
    CHECK(shown.output.find("config: no compiled config matches") != std::string::npos);
    CHECK(shown.output.find("smollm3.block_count: expected 8, found 2") != std::string::npos);
    CHECK(shown.output.find("tensors: 20") != std::string::npos);

    const auto pure = run_tool("smol-synth", "-o " + quoted(scratch_dir() / "pure.gguf") +
                                                 " --preset tiny --layers 2 --dim 256 --ffn 512 --heads 2 --kv-heads 1"
                                                 " --vocab 300 --type Q2_K -t 1");
    CHECK(pure.exit_code == 0);
    const auto pure_shown = run_tool("smol-inspect", quoted(scratch_dir() / "pure.gguf"));
    CHECK(pure_shown.output.find("Q2_K") != std::string::npos);
    CHECK(pure_shown.output.find("Q4_K") == std::string::npos);
    const auto bad_type = run_tool("smol-synth", "-o " + quoted(scratch_dir() / "x.gguf") + " --preset tiny --type Q9_K");
    CHECK(bad_type.exit_code == 2);
    CHECK(bad_type.output.find("--type: expected Q4_K_M or a weight type") != std::string::npos);

    const auto refused = run_tool("smol-synth", "-o " + quoted(scratch_dir() / "x.gguf") + " --preset tiny --dim 320 --heads 2");
    CHECK(refused.exit_code == 1);
    CHECK(refused.output.find("multiple of 256") != std::string::npos);
    CHECK(run_tool("smol-synth", "--preset tiny").exit_code == 2);  // no -o
}

TEST_CASE("smol-bench -o json reports llama-bench's fields for pp and tg") {
    const auto run = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -o json -p 16 -n 4 -r 2 -t 1");
    REQUIRE(run.exit_code == 0);
    const auto json = nlohmann::json::parse(run.output);
    REQUIRE(json.is_array());
    REQUIRE(json.size() == 2);
    const auto info = smol::load_model(synthesized_tiny())->info();
    for (const auto& row : json) {
        CAPTURE(row.dump());
        CHECK(row.at("avg_ts").get<double>() > 0);
        CHECK(row.at("stddev_ts").get<double>() >= 0);
        CHECK(row.at("samples_ts").size() == 2);
        CHECK(row.at("samples_ns").size() == 2);
        CHECK(row.at("n_threads") == 1);
        CHECK(row.at("model_n_params").get<std::uint64_t>() == info.n_params);
        CHECK(row.at("model_size").get<std::uint64_t>() == info.tensor_bytes);
        CHECK(row.at("model_filename") == synthesized_tiny().string());
        CHECK(row.at("model_type").get<std::string>().find("SmolLM3-tiny-512") != std::string::npos);
        CHECK(row.at("peak_rss_bytes").get<std::uint64_t>() > info.file_bytes / 4);
        CHECK(row.at("load_ms").get<double>() >= 0);
    }
    CHECK(json[0].at("test") == "pp16");
    CHECK(json[0].at("n_prompt") == 16);
    CHECK(json[0].at("n_gen") == 0);
    CHECK(json[0].at("gbps").is_null());
    CHECK(json[1].at("test") == "tg4");
    CHECK(json[1].at("n_prompt") == 0);
    CHECK(json[1].at("n_gen") == 4);
    // GB/s: the bytes a token reads (weights, and the cache rows before it: the 1-token start and
    // on average half of the 4 generated) times the mean tokens/s.
    const auto kv_per_token = json[1].at("kv_bytes_per_token").get<double>();
    CHECK(kv_per_token == double(smol::load_model(synthesized_tiny())->make_cache(1).bytes_per_token()));
    CHECK(json[1].at("type_k") == "f16");
    CHECK(json[1].at("type_v") == "f16");
    CHECK(json[1].at("gbps").get<double>() ==
          doctest::Approx((double(info.matrix_bytes) + kv_per_token * (1 + 0.5 * 5)) * json[1].at("avg_ts").get<double>() / 1e9));
    // The machine's own read limit, measured before the tests, and tg's share of it.
    REQUIRE(json[1].at("read_gbps").is_number());
    CHECK(json[1].at("read_gbps").get<double>() > 0.1);
    CHECK(json[0].at("read_gbps") == json[1].at("read_gbps"));  // one thread count, one measurement
    CHECK(json[0].at("bandwidth_fraction").is_null());              // pp reads each weight once per batch
    CHECK(json[1].at("bandwidth_fraction").get<double>() ==
          doctest::Approx(json[1].at("gbps").get<double>() / json[1].at("read_gbps").get<double>()));
    // The int8 MACs a prompt does: rows x cols of every matrix, as the file's tensors give them
    // (all quantized here, so all multiplied in int8), each layer's per token, the LM head once.
    std::uint64_t layer_macs = 0, head_macs = 0;
    const auto file = smol::gguf::File::open(synthesized_tiny());
    for (const auto& t : file.tensors()) {
        if (t.name == "token_embd.weight") head_macs = t.n_elements;
        else if (t.name.starts_with("blk.") && t.shape.size() == 2) layer_macs += t.n_elements;
    }
    CHECK(info.int8_macs.layers == layer_macs);
    CHECK(info.int8_macs.head == head_macs);
    // The int8 peak of the kernel set that runs, timed before the tests, and pp's share of it.
    CHECK(json[1].at("int8_macs_per_s").is_null());  // tg is bound by reading, not multiplying
    CHECK(json[1].at("int8_peak_fraction").is_null());
    if (smol::int8_peak_loop(smol::kernels().isa) == nullptr) {
        MESSAGE("the ", smol::isa_name(smol::kernels().isa), " set has no int8 peak loop: no share to check");
        CHECK(json[0].at("int8_peak_macs_per_s").is_null());
    } else {
        const double macs_per_s = (16.0 * double(layer_macs) + double(head_macs)) * json[0].at("avg_ts").get<double>() / 16;
        CHECK(json[0].at("int8_macs_per_s").get<double>() == doctest::Approx(macs_per_s));
        REQUIRE(json[0].at("int8_peak_macs_per_s").is_number());
        CHECK(json[0].at("int8_peak_macs_per_s").get<double>() > 0);
        CHECK(json[0].at("int8_peak_fraction").get<double>() ==
              doctest::Approx(macs_per_s / json[0].at("int8_peak_macs_per_s").get<double>()));
    }

    // Quantized cache types: named in the model column as llama-bench does, and in the JSON.
    const auto typed = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                  " -o json -p 8 -n 2 -d 40 -r 1 -t 1 --no-bandwidth -ctk q8_0 -ctv q4_0");
    REQUIRE(typed.exit_code == 0);
    const auto typed_json = nlohmann::json::parse(typed.output);
    REQUIRE(typed_json.size() == 2);
    CHECK(typed_json[1].at("type_k") == "q8_0");
    CHECK(typed_json[1].at("type_v") == "q4_0");
    CHECK(typed_json[1].at("n_depth") == 40);
    CHECK(typed_json[1].at("model_type").get<std::string>().find("K q8_0 V q4_0") != std::string::npos);
    CHECK(typed_json[1].at("kv_bytes_per_token").get<double>() < kv_per_token / 2);
    const auto bad_type = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 8 -n 0 -ctk q5_1");
    CHECK(bad_type.exit_code == 2);
    CHECK(bad_type.output.find("-ctk: expected f16, q8_0 or q4_0, found 'q5_1'") != std::string::npos);

    const auto table = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 8 -n 2 -r 1 -t 1 --no-warmup");
    CHECK(table.exit_code == 0);
    CHECK(table.output.find("| model") != std::string::npos);
    CHECK(table.output.find("|            pp8 |") != std::string::npos);
    CHECK(table.output.find("|            tg2 |") != std::string::npos);
    CHECK(table.output.find(" ± ") != std::string::npos);
    CHECK(table.output.find("memory read limit, 1 thread: ") != std::string::npos);
    if (smol::int8_peak_loop(smol::kernels().isa) != nullptr) {
        CHECK(table.output.find("% int8 |") != std::string::npos);  // pp8's share of the peak
        CHECK(table.output.find("int8 peak, 1 thread: ") != std::string::npos);
    }
    CHECK(table.output.find("% read |") != std::string::npos);  // tg2's share of the read limit
    const auto no_peak = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 8 -n 0 -r 1 -t 1 --no-int8-peak -o json");
    REQUIRE(no_peak.exit_code == 0);
    CHECK(nlohmann::json::parse(no_peak.output)[0].at("int8_peak_macs_per_s").is_null());
    const auto no_bandwidth =
        run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 0 -n 2 -r 1 -t 1 --no-bandwidth -o json");
    REQUIRE(no_bandwidth.exit_code == 0);
    CHECK(nlohmann::json::parse(no_bandwidth.output)[0].at("read_gbps").is_null());

    // -d: each test after that many tokens of context, named as llama-bench names it.
    const auto deep = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 8 -n 2 -d 0,24 -r 2 -t 1 --no-bandwidth -o json");
    REQUIRE_MESSAGE(deep.exit_code == 0, deep.output);
    const auto depth_rows = nlohmann::json::parse(deep.output);
    REQUIRE(depth_rows.size() == 4);
    CHECK(depth_rows[0].at("test") == "pp8");
    CHECK(depth_rows[0].at("n_depth") == 0);
    CHECK(depth_rows[2].at("test") == "pp8 @ d24");
    CHECK(depth_rows[2].at("n_depth") == 24);
    CHECK(depth_rows[3].at("test") == "tg2 @ d24");
    CHECK(depth_rows[3].at("samples_ts").size() == 2);
    // --spec-steps: verify steps of K tokens beside step1 (their repetitions interleaved) and a
    // table of what each costs against it; --spec ngram: a whole generation without and with.
    const auto steps = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                  " -p 0 -n 2 -r 2 -t 1 --no-bandwidth --spec-steps 3 -o json");
    REQUIRE_MESSAGE(steps.exit_code == 0, steps.output);
    const auto step_rows = nlohmann::json::parse(steps.output);
    REQUIRE(step_rows.size() == 3);
    CHECK(step_rows[0].at("test") == "tg2");
    CHECK(step_rows[1].at("test") == "step1");
    CHECK(step_rows[1].at("n_step_tokens") == 1);
    CHECK(step_rows[2].at("test") == "step3");
    CHECK(step_rows[2].at("n_step_tokens") == 3);
    CHECK(step_rows[2].at("samples_ns").size() == 2);
    const auto step_table = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                       " -p 0 -n 2 -r 1 -t 1 --no-bandwidth --spec-steps 2");
    REQUIRE_MESSAGE(step_table.exit_code == 0, step_table.output);
    CHECK(step_table.output.find("verify step cost") != std::string::npos);
    CHECK(step_table.output.find("|       1 |      0 |      2 | ") != std::string::npos);  // threads, depth, K
    const auto generated = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                      " -p 0 -n 4 -r 1 -t 1 --no-bandwidth --spec ngram --draft-max 4");
    REQUIRE_MESSAGE(generated.exit_code == 0, generated.output);
    CHECK(generated.output.find(" gen4 |") != std::string::npos);
    CHECK(generated.output.find(" gen4+spec |") != std::string::npos);
    // --spec-accept: drafts made from the plain run's tokens, right with the chance given; at 100%
    // the model takes every drafted token, at 0% none.
    const auto accepting = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                      " -p 0 -n 8 -r 1 -t 1 --no-bandwidth --spec ngram --draft-max 4"
                                                      " --spec-accept 0,100");
    REQUIRE_MESSAGE(accepting.exit_code == 0, accepting.output);
    CHECK(accepting.output.find(" gen8+spec@0% |") != std::string::npos);
    CHECK(accepting.output.find(" gen8+spec@100% |") != std::string::npos);
    const auto accepted_line = [&](int percent) {
        const std::string start = "gen+spec (drafts right " + std::to_string(percent) + "% of the time";
        const std::size_t at = accepting.output.find(start);
        return at == std::string::npos ? std::string() : accepting.output.substr(at, accepting.output.find('\n', at) - at);
    };
    const std::string all = accepted_line(100), none = accepted_line(0);
    INFO(accepting.output);
    CHECK(all.find("(100.0%)") != std::string::npos);
    CHECK(none.find(": 0 of ") != std::string::npos);
    const auto bad_accept = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                       " -p 0 -n 4 --spec ngram --spec-accept 101");
    CHECK(bad_accept.exit_code == 2);
    const auto bad_draft = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                      " -p 0 -n 4 --spec ngram --draft-max 4 --draft-min 5");
    CHECK(bad_draft.exit_code == 2);
    CHECK(bad_draft.output.find("draft_min in [0, draft_max = 4], found 5") != std::string::npos);
    // YaRN, asked for, is named as the other programs name it.
    const auto stretched = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) +
                                                      " -p 8 -n 0 -r 1 -t 1 --no-bandwidth --rope-scaling yarn --rope-scale 2");
    CHECK_MESSAGE(stretched.exit_code == 0, stretched.output);
    CHECK(stretched.output.find("smol-bench: RoPE scaling: YaRN, factor 2 over 65536 tokens\n") != std::string::npos);
    const auto too_deep = run_tool("smol-bench", "-m " + quoted(synthesized_tiny()) + " -p 8 -n 0 -d 200000 -r 1 --no-bandwidth");
    CHECK(too_deep.exit_code == 1);
    CHECK(too_deep.output.find("supports at most 65536 (131072 with YaRN)") != std::string::npos);

    const auto missing = run_tool("smol-bench", "-m " + quoted(scratch_dir() / "none.gguf") + " -p 8 -n 0 -r 1");
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("cannot open") != std::string::npos);
}

// OMP_PROC_BIND makes libgomp bind the initial thread to one CPU before main(), and the mask
// survives the restart with the short OpenMP spin (core/threads.hpp): unless the restart lets the
// thread onto every place again, a team of 2 ends up on that one CPU, at half the speed.
TEST_CASE("smol-bench's team keeps a CPU per thread under OMP_PROC_BIND, through its restart") {
    const std::vector<int> allowed = smol::platform::allowed_cpus();
    if (allowed.size() < 2) {
        MESSAGE("this process may run on ", allowed.size(), " CPU(s): no team of 2 to spread");
        return;
    }
    // The ctest environment sets the short spin, which would skip the restart: unset it.
    const std::string restarts = "-u GOMP_SPINCOUNT -u KMP_BLOCKTIME -u OMP_WAIT_POLICY -u SMOL_KEEP_OPENMP_WAIT";
    const std::string args = "-m " + quoted(synthesized_tiny()) + " -o json -p 8 -n 0 -r 1 -t 1,2 --no-int8-peak";
    const auto team_cpus = [](const nlohmann::json& rows, int threads) {
        for (const auto& row : rows)
            if (row.at("n_threads") == threads) return row.at("team_cpus").get<std::vector<int>>();
        FAIL("no row for ", threads, " threads in ", rows.dump());
        return std::vector<int>{};
    };
    const auto free = run_tool("smol-bench", args, restarts);
    REQUIRE(free.exit_code == 0);
    const auto free_rows = nlohmann::json::parse(free.output);
    CHECK(team_cpus(free_rows, 2) == allowed);  // unbound: every thread may run anywhere
    CHECK(team_cpus(free_rows, 1) == allowed);

    const auto bound = run_tool("smol-bench", args, restarts + " OMP_PROC_BIND=close");
    REQUIRE(bound.exit_code == 0);
    const auto bound_rows = nlohmann::json::parse(bound.output);
    // close: thread i on place i, places being the CPUs the process was given, in order.
    CHECK(team_cpus(bound_rows, 2) == std::vector<int>{allowed[0], allowed[1]});
    CHECK(team_cpus(bound_rows, 1) == std::vector<int>{allowed[0]});
}

TEST_CASE("smol-logits writes the reference logits of both tiny fixtures, and with YaRN") {
    // A fixture prompt through the program: the file must hold [n_tokens][n_vocab]
    // little-endian floats within the fixture's NMSE bound of llama.cpp's.
    struct Case {
        const char* dir;
        const char* model;
        int prompt;
        const char* reference;  // relative to tests/data
        const char* flags;
        double max_nmse;
    };
    for (const Case& c : {Case{"tiny-f32", "smollm3-tiny-f32.gguf", 1, "tiny-f32/ref-p1.logits.f32", "", 1e-4},
                          Case{"tiny", "smollm3-tiny-Q4_K_M.gguf", 1, "tiny/ref-p1.logits.f32", "", 2e-3},
                          Case{"tiny-f32", "smollm3-tiny-f32.gguf", 3, "yarn/ref-p3-yarn4-orig64.logits.f32",
                               " --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 64", 1e-4}}) {
        CAPTURE(c.reference);
        const fs::path dir = fs::path(SMOL_TEST_DATA_DIR) / c.dir;
        std::ifstream prompts(dir / "prompts.txt");
        std::string line;
        for (int p = 0; p <= c.prompt; ++p) std::getline(prompts, line);
        const fs::path out = scratch_dir() / (std::string(c.dir) + "-p" + std::to_string(c.prompt) + ".f32");
        const auto run = run_tool("smol-logits", "-m " + quoted(dir / c.model) + " --tokens " + line + " -o " + quoted(out) +
                                                     " -t 2" + c.flags);
        REQUIRE_MESSAGE(run.exit_code == 0, run.output);
        CHECK((run.output.find("YaRN, factor 4 over 64 tokens") != std::string::npos) == (*c.flags != '\0'));
        const auto ours = read_bytes(out);
        const auto ref = read_bytes(fs::path(SMOL_TEST_DATA_DIR) / c.reference);
        REQUIRE(ours.size() == ref.size());
        const std::size_t n_vocab = 4096, n_rows = ref.size() / sizeof(float) / n_vocab;
        for (std::size_t r = 0; r < n_rows; ++r) {
            double err = 0, norm = 0;
            for (std::size_t i = 0; i < n_vocab; ++i) {
                float a, b;
                std::memcpy(&a, ours.data() + (r * n_vocab + i) * sizeof(float), sizeof a);
                std::memcpy(&b, ref.data() + (r * n_vocab + i) * sizeof(float), sizeof b);
                err += double(a - b) * double(a - b);
                norm += double(b) * double(b);
            }
            CHECK_MESSAGE(err / norm < c.max_nmse, "row ", r);
        }
    }
    const auto bad = run_tool("smol-logits", "-m " + quoted(kTinyFixture) + " --tokens 1,x,3");
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("expected comma-separated token ids") != std::string::npos);
    const auto linear = run_tool("smol-logits", "-m " + quoted(kTinyFixture) + " --tokens 1,2 --rope-scaling linear");
    CHECK(linear.exit_code == 2);
    CHECK(linear.output.find("--rope-scaling: expected none or yarn") != std::string::npos);
    const auto small = run_tool("smol-logits", "-m " + quoted(kTinyFixture) + " --tokens 1,2 --rope-scale 0.5");
    CHECK(small.exit_code == 2);
    CHECK(small.output.find("--rope-scale: expected a factor of at least 1, found '0.5'") != std::string::npos);
}

}  // namespace test_tools
