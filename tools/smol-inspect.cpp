// smol-inspect: what a GGUF holds and whether smol can run it: metadata, tensor table, counts
// per type, bits per weight, and which compiled config matches (or why none does).
//
//   smol-inspect FILE [--no-tensors]
//   smol-inspect FILE --hf-tokenizer OUT.json [--no-control-tokens]

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "program_args.hpp"
#include "smol/smol.hpp"

namespace {

constexpr std::size_t kMaxString = 80;     // characters of a string value shown
constexpr std::size_t kArrayPreview = 6;   // elements of a long array shown

// Quoted, with control characters escaped and the tail cut off past `limit` characters.
std::string quote(std::string_view s, std::size_t limit = kMaxString) {
    std::string out = "\"";
    const std::size_t shown = std::min(s.size(), limit);
    for (std::size_t i = 0; i < shown; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == '"' || c == '\\') (out += '\\') += char(c);
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else out += char(c);
    }
    out += "\"";
    if (shown < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
    return out;
}

std::string number(const smol::gguf::Value& v) {
    using smol::gguf::ValueType;
    char buf[64];
    switch (v.type()) {
        case ValueType::F32: case ValueType::F64: std::snprintf(buf, sizeof buf, "%g", *v.as_float()); return buf;
        case ValueType::Bool: return *v.as_bool() ? "true" : "false";
        case ValueType::U64: return std::to_string(*v.as_uint());
        default: return std::to_string(*v.as_int());
    }
}

std::string describe_value(const smol::gguf::Value& v) {
    using smol::gguf::ValueType;
    if (v.is_string()) return quote(*v.as_string());
    if (!v.is_array()) return number(v);
    const auto* a = v.array_data();
    const std::size_t shown = a->count <= kArrayPreview + 2 ? std::size_t(a->count) : kArrayPreview;
    std::string items;
    for (std::size_t i = 0; i < shown; ++i) {
        if (i) items += ", ";
        if (a->element_type == ValueType::String) items += quote(a->strings[i], 24);
        else if (a->element_type == ValueType::Array) items.append("[").append(a->nested[i].describe_type()).append("]");
        else {
            const auto* p = a->packed + i * smol::gguf::value_type_size(a->element_type);
            items += number(smol::gguf::Value::scalar(a->element_type, p));
        }
    }
    if (shown < a->count) items += ", ...";
    return "[" + items + "]";
}

std::string human_bytes(std::uint64_t bytes) {
    char buf[48];
    if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1ull << 20));
    else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", double(bytes) / 1024.0);
    else std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
    return buf;
}

// smol-inspect's one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(std::string& path, std::string& tokenizer_json_path, bool& show_tensors,
                                 bool& with_control_tokens, bool& help) {
    using namespace smol::args;
    FlagTable table("usage: smol-inspect FILE [--tensors | --no-tensors]\n"
                    "       smol-inspect FILE --hf-tokenizer OUT.json [--no-control-tokens]\n"
                    "  Prints a GGUF's metadata, tensor table (name, type, shape, offset), counts per type, size\n"
                    "  and bits per weight, and whether the file matches a model config compiled into smol.");
    table.add({{"--tensors"}, "", "list the tensors (the default)", switch_value(show_tensors, true)})
        .add({{"--no-tensors"}, "", "leave the tensor table out", switch_value(show_tensors, false)})
        .add({{"--hf-tokenizer"}, "OUT.json",
              "write the file's tokenizer as a Hugging Face tokenizer.json instead (Llama 3 layout, for cross-checks "
              "with Hugging Face's tokenizers)",
              FlagValue{[&tokenizer_json_path](const std::string&, const std::string& out) { tokenizer_json_path = out; },
                        "an output path", ""}})
        .add({{"--no-control-tokens"}, "", "with --hf-tokenizer: leave the CONTROL tokens out, as when special tokens "
              "are not parsed", switch_value(with_control_tokens, false)})
        .add(help_flag(help))
        .positional([&path](const std::string& arg) {
            if (!path.empty()) throw smol::args::UsageError("expected one file, found '" + path + "' and '" + arg + "'");
            path = arg;
        });
    return table;
}

}  // namespace

int main(int argc, char** argv) {
    std::string path, tokenizer_json_path;
    bool show_tensors = true;
    bool with_control_tokens = true;
    bool help = false;
    const smol::args::FlagTable table = flag_table(path, tokenizer_json_path, show_tensors, with_control_tokens, help);
    if (const auto status = table.parse_or_exit_status(argc, argv, help, "smol-inspect", [&] {
            if (path.empty()) throw smol::args::UsageError("expected a GGUF file");
        }))
        return *status;
    try {
        const auto file = smol::gguf::File::open(path);
        if (!tokenizer_json_path.empty()) {
            std::ofstream out(tokenizer_json_path, std::ios::binary);
            const auto tokenizer = smol::text::Tokenizer::from_gguf(file);
            out << smol::text::hf_tokenizer_json(file, tokenizer, with_control_tokens).dump() << "\n";
            if (!out.good()) smol::fail("cannot write ", tokenizer_json_path);
            std::printf("wrote %s\n", tokenizer_json_path.c_str());
            return 0;
        }
        std::printf("file: %s\n", path.c_str());
        std::printf("size: %" PRIu64 " bytes (%s)\n", file.file_size(), human_bytes(file.file_size()).c_str());
        std::printf("gguf: version %u, alignment %" PRIu64 ", data section at offset %" PRIu64 "\n", file.version(),
                    file.alignment(), file.data_offset());
        std::printf("architecture: %s\n", std::string(file.get_string_or("general.architecture", "(missing)")).c_str());
        if (const auto name = file.get_string_or("general.name", ""); !name.empty())
            std::printf("name: %s\n", std::string(name).c_str());

        std::size_t key_width = 0;
        for (const auto& [key, value] : file.metadata()) key_width = std::max(key_width, key.size());
        std::printf("\nmetadata: %zu keys\n", file.metadata().size());
        for (const auto& [key, value] : file.metadata())
            std::printf("  %-*s  %-22s %s\n", int(key_width), key.c_str(), value.describe_type().c_str(),
                        describe_value(value).c_str());

        const auto& tensors = file.tensors();
        std::size_t name_width = 4;
        for (const auto& t : tensors) name_width = std::max(name_width, t.name.size());
        std::printf("\ntensors: %zu\n", tensors.size());
        if (show_tensors && !tensors.empty()) {
            std::printf("  %5s  %-*s  %-7s  %-18s  %14s  %12s\n", "#", int(name_width), "name", "type", "shape",
                        "offset", "bytes");
            for (std::size_t i = 0; i < tensors.size(); ++i) {
                const auto& t = tensors[i];
                std::printf("  %5zu  %-*s  %-7s  %-18s  %14" PRIu64 "  %12" PRIu64 "\n", i, int(name_width),
                            t.name.c_str(), std::string(smol::type_name(t.type)).c_str(), t.shape_string().c_str(),
                            file.data_offset() + t.offset, t.n_bytes);
            }
            std::printf("  (offsets are from the start of the file)\n");
        }

        struct TypeTotals {
            std::size_t tensors = 0;
            std::uint64_t elements = 0, bytes = 0;
        };
        std::map<smol::TensorType, TypeTotals> per_type;
        std::uint64_t n_params = 0, tensor_bytes = 0;
        for (const auto& t : tensors) {
            auto& totals = per_type[t.type];
            totals.tensors += 1;
            totals.elements += t.n_elements;
            totals.bytes += t.n_bytes;
            n_params += t.n_elements;
            tensor_bytes += t.n_bytes;
        }
        // Every ggml type is read and counted; the types smol has no kernel for are named, so a file
        // that cannot run says which of its types is why rather than failing to open.
        std::printf("\ntypes:\n");
        std::string cannot_run;
        for (const auto& [type, totals] : per_type) {
            const bool runs = smol::is_weight_type(type);
            std::printf("  %-7s  %4zu tensors  %14" PRIu64 " weights  %12s  %s\n", std::string(smol::type_name(type)).c_str(),
                        totals.tensors, totals.elements, human_bytes(totals.bytes).c_str(),
                        runs ? "runs" : "read only: smol has no kernel for it");
            if (!runs) cannot_run.append(cannot_run.empty() ? "" : ", ").append(smol::type_name(type));
        }
        if (!cannot_run.empty())
            std::printf("types smol cannot run: %s (it runs %s)\n", cannot_run.c_str(), smol::supported_weight_types().c_str());
        std::printf("parameters: %" PRIu64 " (%.2f B)\n", n_params, double(n_params) / 1e9);
        std::printf("tensor data: %" PRIu64 " bytes (%s)\n", tensor_bytes, human_bytes(tensor_bytes).c_str());
        if (n_params > 0)
            std::printf("bits per weight: %.3f (tensor data), %.3f (whole file)\n",
                        8.0 * double(tensor_bytes) / double(n_params), 8.0 * double(file.file_size()) / double(n_params));

        std::printf("\nconfig: %s\n", smol::match_report(file).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-inspect: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
