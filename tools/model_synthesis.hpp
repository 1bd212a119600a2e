#pragma once
// Synthetic SmolLM3 model files: the real network's shape and llama.cpp's Q4_K_M tensor types
// (or one type for every matrix, as llama-quantize --pure), filled with seeded random weights, so anyone can benchmark smol without downloading the model.
// The plan (names, shapes, types) is computed apart from the data, so tests can check the 3B
// layout without writing 1.9 GB. The data is drawn in float and quantized by smol's own
// quantizers, rows in parallel with OpenMP, one tensor at a time streamed to disk. A tool's
// concern, not the library's: it lives beside smol-synth and uses only the public API.

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/smol.hpp"

namespace smol::synth {

// The sizes of a synthetic file: the `smollm3.*` hyperparameters it declares.
struct Shape {
    int n_layers = 0;
    int d_model = 0;     // embedding_length
    int d_ffn = 0;       // feed_forward_length
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;    // rope.dimension_count
    int n_vocab = 0;
    float rope_theta = 5e6f;
    float norm_eps = 1e-6f;
    int context_length = 65536;

    int d_q() const { return n_heads * head_dim; }
    int d_kv() const { return n_kv_heads * head_dim; }
};

inline Shape shape_of(const Hyperparameters& hp) {
    return Shape{hp.n_layers, hp.d_model, hp.d_ffn, hp.n_heads, hp.n_kv_heads, hp.head_dim,
                 hp.n_vocab, hp.rope_theta, hp.norm_eps, hp.max_context};
}

// "3b": SmolLM3-3B; "tiny": the quantized test fixture's shape (config SmolLM3_TinyQ4).
inline Shape preset(std::string_view name) {
    if (name == "3b" || name == "3B") return shape_of(SmolLM3_3B::hp);
    if (name == "tiny") return shape_of(SmolLM3_TinyQ4::hp);
    fail("unknown preset '", name, "' (expected 3b or tiny)");
}

// Every dimension a K-quant block runs along (the input width of each matrix) must be a whole
// number of 256-weight blocks; llama.cpp would silently fall back to other types instead.
inline void validate(const Shape& s) {
    auto positive = [](const char* what, long long v) {
        if (v <= 0) fail("synthetic model: expected a positive ", what, ", found ", v);
    };
    positive("layer count", s.n_layers);
    positive("model width (--dim)", s.d_model);
    positive("FFN width (--ffn)", s.d_ffn);
    positive("head count (--heads)", s.n_heads);
    positive("KV head count (--kv-heads)", s.n_kv_heads);
    positive("head dimension", s.head_dim);
    positive("vocabulary size (--vocab)", s.n_vocab);
    if (s.n_heads % s.n_kv_heads != 0)
        fail("synthetic model: the ", s.n_heads, " query heads must divide evenly among the ", s.n_kv_heads, " KV heads");
    if (s.head_dim % 2 != 0) fail("synthetic model: head dimension must be even for RoPE, found ", s.head_dim);
    auto blocks = [](const char* what, int v) {
        if (v % int(QK_K) != 0)
            fail("synthetic model: ", what, " must be a multiple of ", QK_K, " (the Q4_K/Q6_K block size), found ", v);
    };
    blocks("model width (--dim)", s.d_model);
    blocks("FFN width (--ffn)", s.d_ffn);
    blocks("query width (heads x head dim)", s.d_q());
}

// llama.cpp's use_more_bits: which layers get Q6_K for attn_v and ffn_down in Q4_K_M. Integer
// division, as in llama.cpp; the first two tests short-circuit before the subtraction can go
// negative.
constexpr bool use_more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

enum class Init { Weight, Norm };

// One tensor of the file as planned, before any data exists.
struct PlannedTensor {
    std::string name;
    TensorType type = TensorType::F32;
    std::vector<std::int64_t> shape;  // ggml order: shape[0] is the input (contiguous) dimension
    Init init = Init::Weight;

    std::int64_t row_length() const { return shape[0]; }
    std::int64_t rows() const { return shape.size() > 1 ? shape[1] : 1; }
    std::uint64_t n_elements() const { return std::uint64_t(row_length()) * std::uint64_t(rows()); }
    std::uint64_t row_bytes() const {
        const auto t = traits_of(type);
        return std::uint64_t(row_length()) / t.block_elements * t.block_bytes;
    }
    std::uint64_t n_bytes() const { return row_bytes() * std::uint64_t(rows()); }
};

// The Q4_K_M recipe over the SmolLM3 tensor list (tied embeddings: token_embd is also the LM
// head, so llama.cpp gives it the output tensor's Q6_K), in the order llama.cpp's quantize tool
// writes them (as in the tiny fixture: output_norm, token_embd, then each layer's by name).
// With `matrix_type`, every matrix has that type instead (llama-quantize --pure); norms stay F32.
inline std::vector<PlannedTensor> plan_tensors(const Shape& s, std::optional<TensorType> matrix_type = {}) {
    validate(s);
    if (matrix_type && (!is_weight_type(*matrix_type) || type_row(*matrix_type, "synthetic model").from_float[0] == nullptr))
        fail("synthetic model: matrices of type ", type_name(*matrix_type), " are not supported (expected one of ",
             supported_weight_types(true), ")");
    const std::int64_t d = s.d_model, f = s.d_ffn, q = s.d_q(), kv = s.d_kv();
    std::vector<PlannedTensor> plan;
    plan.push_back({"output_norm.weight", TensorType::F32, {d}, Init::Norm});
    plan.push_back({"token_embd.weight", TensorType::Q6_K, {d, s.n_vocab}, Init::Weight});
    for (int il = 0; il < s.n_layers; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const TensorType more = use_more_bits(il, s.n_layers) ? TensorType::Q6_K : TensorType::Q4_K;
        plan.push_back({p + "attn_k.weight", TensorType::Q4_K, {d, kv}, Init::Weight});
        plan.push_back({p + "attn_norm.weight", TensorType::F32, {d}, Init::Norm});
        plan.push_back({p + "attn_output.weight", TensorType::Q4_K, {q, d}, Init::Weight});
        plan.push_back({p + "attn_q.weight", TensorType::Q4_K, {d, q}, Init::Weight});
        plan.push_back({p + "attn_v.weight", more, {d, kv}, Init::Weight});
        plan.push_back({p + "ffn_down.weight", more, {f, d}, Init::Weight});
        plan.push_back({p + "ffn_gate.weight", TensorType::Q4_K, {d, f}, Init::Weight});
        plan.push_back({p + "ffn_norm.weight", TensorType::F32, {d}, Init::Norm});
        plan.push_back({p + "ffn_up.weight", TensorType::Q4_K, {d, f}, Init::Weight});
    }
    if (matrix_type)
        for (PlannedTensor& t : plan)
            if (t.init == Init::Weight) t.type = *matrix_type;
    return plan;
}

// llama.cpp's general.file_type for the recipe (MOSTLY_Q4_K_M) or a file of one matrix type.
inline std::uint32_t llama_file_type(std::optional<TensorType> matrix_type) {
    if (!matrix_type) return 15;
    switch (*matrix_type) {
        case TensorType::F32: return 0;
        case TensorType::F16: return 1;
        case TensorType::Q4_0: return 2;
        case TensorType::Q4_1: return 3;
        case TensorType::Q8_0: return 7;
        case TensorType::Q5_0: return 8;
        case TensorType::Q5_1: return 9;
        case TensorType::Q2_K: return 10;
        case TensorType::Q3_K: return 12;  // MOSTLY_Q3_K_M: llama-quantize's name for Q3_K (likewise below)
        case TensorType::Q4_K: return 15;  // MOSTLY_Q4_K_M
        case TensorType::Q5_K: return 17;  // MOSTLY_Q5_K_M
        case TensorType::Q6_K: return 18;
        case TensorType::BF16: return 32;
        default: fail("synthetic model: no llama.cpp file type for ", type_name(*matrix_type), " matrices");
    }
}

// Weights: mean 0, std 0.02 (a typical init); norm weights: 1 + the same noise.
inline constexpr float kWeightStd = 0.02f;

namespace detail {

inline std::uint64_t mix64(std::uint64_t z) {  // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Fills one row with approximately gaussian values of std `std` around `mean`. Counter-based
// (value i depends only on the key and i), so the file is the same whatever the thread count,
// and the loop has no carried state, so it vectorizes. Each value is an Irwin-Hall sum of four
// 16-bit uniforms: exact mean and variance, tails cut at 3.46 std, at one hash per value
// (Box-Muller's log and sin would dominate the time of a 3-billion-weight file).
inline void fill_row(float* out, std::int64_t n, std::uint64_t key, float mean, float std) {  // out: [n]
    constexpr float kCenter = 4.0f * 32767.5f;
    const float scale = std / (65536.0f * std::sqrt(4.0f / 12.0f));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint64_t r = mix64(key + std::uint64_t(i + 1) * 0x9e3779b97f4a7c15ull);
        const float sum = float(r & 0xffff) + float((r >> 16) & 0xffff) + float((r >> 32) & 0xffff) + float(r >> 48);
        out[i] = mean + (sum - kCenter) * scale;
    }
}

inline std::uint64_t row_key(std::uint64_t seed, std::size_t tensor, std::int64_t row) {
    return mix64(mix64(seed ^ 0x5eed5eed5eed5eedull) + mix64(std::uint64_t(tensor) + 1) * 31 + std::uint64_t(row));
}

// Tensor bytes: every row drawn and quantized independently, rows split among the threads.
inline std::vector<std::uint8_t> produce_tensor(const PlannedTensor& t, std::size_t index, std::uint64_t seed,
                                                int threads) {
    const std::int64_t n = t.row_length(), rows = t.rows();
    const std::uint64_t row_bytes = t.row_bytes();
    std::vector<std::uint8_t> bytes(t.n_bytes());  // [rows, row_bytes]
    const float mean = t.init == Init::Norm ? 1.0f : 0.0f;
#pragma omp parallel num_threads(thread_team(threads))
    {
        std::vector<float> row(static_cast<std::size_t>(n));  // [n]
#pragma omp for schedule(dynamic, 16)
        for (std::int64_t r = 0; r < rows; ++r) {
            fill_row(row.data(), n, row_key(seed, index, r), mean, kWeightStd);
            quantize_row(t.type, row.data(), bytes.data() + std::uint64_t(r) * row_bytes, n);
        }
    }
    return bytes;
}

// Re-encodes a metadata value the way the writer stores it after the type tag.
inline void append_value(std::vector<std::uint8_t>& out, const gguf::Value& v) {
    auto put = [&out]<class T>(T x) {
        const std::size_t at = out.size();
        out.resize(at + sizeof(T));
        std::memcpy(out.data() + at, &x, sizeof(T));
    };
    auto put_string = [&](std::string_view s) {
        put(std::uint64_t(s.size()));
        out.insert(out.end(), s.begin(), s.end());
    };
    using gguf::ValueType;
    switch (v.type()) {
        case ValueType::U8: put(std::uint8_t(*v.as_uint())); return;
        case ValueType::I8: put(std::int8_t(*v.as_int())); return;
        case ValueType::U16: put(std::uint16_t(*v.as_uint())); return;
        case ValueType::I16: put(std::int16_t(*v.as_int())); return;
        case ValueType::U32: put(std::uint32_t(*v.as_uint())); return;
        case ValueType::I32: put(std::int32_t(*v.as_int())); return;
        case ValueType::U64: put(std::uint64_t(*v.as_uint())); return;
        case ValueType::I64: put(std::int64_t(*v.as_int())); return;
        case ValueType::F32: put(float(*v.as_float())); return;
        case ValueType::F64: put(double(*v.as_float())); return;
        case ValueType::Bool: put(std::uint8_t(*v.as_bool())); return;
        case ValueType::String: put_string(*v.as_string()); return;
        case ValueType::Array: {
            const auto* a = v.array_data();
            put(std::uint32_t(a->element_type));
            put(std::uint64_t(a->count));
            if (a->element_type == ValueType::String)
                for (auto s : a->strings) put_string(s);
            else if (a->element_type == ValueType::Array)
                for (const auto& nested : a->nested) append_value(out, nested);
            else {
                const std::size_t n = std::size_t(a->count) * gguf::value_type_size(a->element_type);
                out.insert(out.end(), a->packed, a->packed + n);
            }
            return;
        }
    }
}

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the rest for U+0100 on.
inline std::vector<std::string> byte_level_pieces() {
    std::vector<std::string> pieces(256);
    auto utf8 = [](unsigned cp) {
        std::string s;
        if (cp < 0x80) s += char(cp);
        else {
            s += char(0xC0 | (cp >> 6));
            s += char(0x80 | (cp & 0x3F));
        }
        return s;
    };
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        pieces[b] = utf8(printable ? b : next++);
    }
    return pieces;
}

}  // namespace detail

// Where the tokenizer of a synthetic file came from.
struct VocabChoice {
    std::filesystem::path file;  // empty: synthesized
    std::string note;            // why a candidate was skipped, or that the vocabulary is synthetic
};

struct Options {
    Shape shape;
    std::uint64_t seed = 42;
    // GGUFs whose tokenizer.* keys (tokens, merges, types, special ids, chat template) are copied;
    // the first whose vocabulary has exactly shape.n_vocab tokens is used.
    std::vector<std::filesystem::path> vocab_files;
    // Fail rather than synthesize a byte-level vocabulary when no vocab file fits (--vocab given).
    bool require_vocab_file = false;
    std::string name;  // general.name; empty: described from the shape
    std::optional<TensorType> matrix_type;  // every matrix of this type; empty: the Q4_K_M recipe
    int threads = 0;  // threads quantizing the rows; 0: OpenMP's default (smol::thread_team)
};

struct Progress {
    std::size_t tensors_done = 0;
    std::size_t tensors_total = 0;
    std::uint64_t bytes_done = 0;   // tensor data
    std::uint64_t bytes_total = 0;
    std::string_view current;       // the tensor just written
    double seconds = 0;
};

struct Result {
    std::size_t n_tensors = 0;
    std::uint64_t n_params = 0;
    std::uint64_t tensor_bytes = 0;
    std::uint64_t file_bytes = 0;
    VocabChoice vocab;
    double seconds = 0;
};

// Picks the tokenizer source; see Options::vocab_files.
inline VocabChoice choose_vocab(const Options& options) {
    VocabChoice choice;
    for (const auto& path : options.vocab_files) {
        std::string problem;
        if (!std::filesystem::exists(path)) {
            problem = path.string() + ": not found";
        } else {
            const auto file = gguf::File::open(path);
            const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
            if (!tokens || !tokens->is_array())
                problem = path.string() + ": has no tokenizer.ggml.tokens array";
            else if (tokens->size() != std::size_t(options.shape.n_vocab))
                problem = path.string() + ": vocabulary of " + std::to_string(tokens->size()) + " tokens, expected " +
                          std::to_string(options.shape.n_vocab);
        }
        if (problem.empty()) {
            choice.file = path;
            return choice;
        }
        if (options.require_vocab_file) fail("vocab file ", problem);
        choice.note += (choice.note.empty() ? "" : "; ") + problem;
    }
    if (options.require_vocab_file) fail("no vocab file given");
    choice.note += std::string(choice.note.empty() ? "" : "; ") +
                   "using a synthesized byte-level vocabulary (256 byte tokens, 6 special tokens, the rest unused; "
                   "no merges, no chat template): fine for benchmarks, not for real text";
    return choice;
}

// Copies the tokenizer of `choice` into `writer`, or writes a byte-level one of `n_vocab` tokens.
inline void add_tokenizer(gguf::Writer& writer, const VocabChoice& choice, int n_vocab) {
    if (!choice.file.empty()) {
        const auto file = gguf::File::open(choice.file);
        for (const auto& [key, value] : file.metadata()) {
            if (!key.starts_with("tokenizer.")) continue;
            std::vector<std::uint8_t> payload;
            detail::append_value(payload, value);
            writer.set_raw(key, std::uint32_t(value.type()), std::move(payload));
        }
        return;
    }
    const std::vector<std::string> specials = {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>",
                                               "<|im_end|>", "<think>", "</think>"};
    if (n_vocab < int(256 + specials.size()))
        fail("synthetic vocabulary: expected at least ", 256 + specials.size(), " tokens, found ", n_vocab);
    std::vector<std::string> tokens = detail::byte_level_pieces();
    std::vector<std::int32_t> types(256, 1);  // normal
    for (std::size_t i = 0; i < specials.size(); ++i) {
        tokens.push_back(specials[i]);
        types.push_back(i < 4 ? 3 : 4);  // control; <think> tags user-defined as in SmolLM3
    }
    while (tokens.size() < std::size_t(n_vocab)) {
        tokens.push_back("<|unused_" + std::to_string(tokens.size()) + "|>");
        types.push_back(5);  // unused: never produced by the tokenizer
    }
    writer.set_string("tokenizer.ggml.model", "gpt2");
    writer.set_string("tokenizer.ggml.pre", "smaug-bpe");
    writer.set_string_array("tokenizer.ggml.tokens", tokens);
    writer.set_array("tokenizer.ggml.token_type", gguf::ValueType::I32, types);
    writer.set_string_array("tokenizer.ggml.merges", {});
    writer.set_u32("tokenizer.ggml.bos_token_id", 256);
    writer.set_u32("tokenizer.ggml.eos_token_id", 259);  // <|im_end|>, as in SmolLM3
    writer.set_bool("tokenizer.ggml.add_bos_token", false);
}

// Writes the synthetic model to `out`. `on_progress` is called after every tensor (from the
// calling thread).
inline Result write_model(const std::filesystem::path& out, const Options& options,
                          const std::function<void(const Progress&)>& on_progress = {}) {
    const auto start = std::chrono::steady_clock::now();
    const Shape& s = options.shape;
    const std::vector<PlannedTensor> plan = plan_tensors(s, options.matrix_type);

    Result result;
    result.vocab = choose_vocab(options);

    gguf::Writer writer;
    writer.set_string("general.architecture", "smollm3");
    writer.set_string("general.type", "model");
    writer.set_string("general.name", options.name.empty()
                                          ? "SmolLM3 synthetic " + std::to_string(s.n_layers) + "x" +
                                                std::to_string(s.d_model) + " (seeded random weights)"
                                          : options.name);
    writer.set_string("general.description", "random weights from smol-synth, seed " + std::to_string(options.seed) +
                                                 ": for benchmarks, not for text");
    writer.set_u32("smollm3.block_count", std::uint32_t(s.n_layers));
    writer.set_u32("smollm3.context_length", std::uint32_t(s.context_length));
    writer.set_u32("smollm3.embedding_length", std::uint32_t(s.d_model));
    writer.set_u32("smollm3.feed_forward_length", std::uint32_t(s.d_ffn));
    writer.set_u32("smollm3.attention.head_count", std::uint32_t(s.n_heads));
    writer.set_u32("smollm3.attention.head_count_kv", std::uint32_t(s.n_kv_heads));
    writer.set_f32("smollm3.rope.freq_base", s.rope_theta);
    writer.set_f32("smollm3.attention.layer_norm_rms_epsilon", s.norm_eps);
    writer.set_u32("smollm3.rope.dimension_count", std::uint32_t(s.head_dim));
    writer.set_u32("smollm3.vocab_size", std::uint32_t(s.n_vocab));
    add_tokenizer(writer, result.vocab, s.n_vocab);
    writer.set_u32("general.quantization_version", 2);
    writer.set_u32("general.file_type", llama_file_type(options.matrix_type));

    Progress progress;
    progress.tensors_total = plan.size();
    for (const auto& t : plan) {
        progress.bytes_total += t.n_bytes();
        result.n_params += t.n_elements();
    }
    result.tensor_bytes = progress.bytes_total;
    for (std::size_t i = 0; i < plan.size(); ++i) {
        const PlannedTensor& t = plan[i];
        writer.add_tensor(t.name, t.type, t.shape, [&t, i, &options, &progress, &on_progress, start] {
            auto bytes = detail::produce_tensor(t, i, options.seed, options.threads);
            progress.tensors_done += 1;
            progress.bytes_done += bytes.size();
            progress.current = t.name;
            progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (on_progress) on_progress(progress);
            return bytes;
        });
    }
    writer.write(out);
    result.n_tensors = plan.size();
    result.file_bytes = std::filesystem::file_size(out);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace smol::synth
