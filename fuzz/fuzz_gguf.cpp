// libFuzzer target for the GGUF reader. Any input must either parse or throw smol::Error; a
// parsed file must hold only values and tensors inside its own bytes. Everything else (a
// sanitizer report, another exception type, a broken invariant) is a finding.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "smol/gguf/reader.hpp"

namespace {

using smol::gguf::File;
using smol::gguf::Value;
using smol::gguf::ValueType;

volatile std::uint64_t g_sink;  // keeps the reads below from being optimized away

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_gguf: invariant broken: %s\n", what);
    std::abort();
}

bool inside(const File& f, const void* p, std::size_t n) {
    const auto* begin = f.memory().data();
    const auto* q = static_cast<const std::uint8_t*>(p);
    return q >= begin && n <= f.memory().size() && std::size_t(q - begin) <= f.memory().size() - n;
}

// Reads every byte a value refers to, through every accessor that applies to it.
void touch(const File& f, const Value& v, int depth) {
    if (depth > smol::gguf::kMaxArrayNesting) finding("array nesting deeper than the limit");
    std::uint64_t sum = std::uint64_t(v.type());
    if (auto i = v.as_int()) sum += std::uint64_t(*i);
    if (auto u = v.as_uint()) sum += *u;
    if (auto d = v.as_float()) sum += *d == *d ? 1 : 2;  // NaN is a legal f32/f64 value
    if (auto b = v.as_bool()) sum += *b;
    if (auto s = v.as_string()) {
        if (!s->empty() && !inside(f, s->data(), s->size())) finding("string outside the file");
        for (char c : *s) sum += std::uint8_t(c);
    }
    sum += v.describe_type().size();
    if (v.is_array()) {
        const Value::Array* a = v.array_data();
        if (!a || a->count != v.size()) finding("array without data or with a wrong count");
        sum += std::uint64_t(v.element_type());
        if (a->element_type == ValueType::String) {
            if (v.strings().size() != a->count) finding("string array count");
            for (auto s : v.strings()) {
                if (!s.empty() && !inside(f, s.data(), s.size())) finding("array string outside the file");
                for (char c : s) sum += std::uint8_t(c);
            }
        } else if (a->element_type == ValueType::Array) {
            if (a->nested.size() != a->count) finding("nested array count");
            for (const Value& inner : a->nested) touch(f, inner, depth + 1);
        } else {
            const std::size_t bytes = std::size_t(a->count) * smol::gguf::value_type_size(a->element_type);
            if (bytes && !inside(f, a->packed, bytes)) finding("packed array outside the file");
            if (a->element_type != ValueType::F32 && a->element_type != ValueType::F64)
                for (auto i : v.ints()) sum += std::uint64_t(i);
            if (a->element_type != ValueType::Bool)
                for (double d : v.floats()) sum += d == d ? 1 : 2;
        }
    }
    g_sink = g_sink + sum;
}

template <class Call>
void expect_error_or_value(Call&& call) {
    try {
        call();
    } catch (const smol::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // An exact-size heap copy, so ASan flags a read one byte past the end.
    std::vector<std::uint8_t> bytes(data, data + size);
    try {
        const File f = File::from_bytes(std::move(bytes), "fuzz.gguf");
        if (f.version() != 2 && f.version() != 3) finding("accepted an unsupported version");
        if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1))) finding("alignment not a power of two");
        for (const auto& entry : f.metadata()) {
            const std::string& key = entry.first;  // clang 14 cannot capture structured bindings
            const Value& value = entry.second;
            if (key.empty() || f.find(key) != &value) finding("metadata key lookup");
            touch(f, value, 0);
            expect_error_or_value([&] { g_sink = g_sink + std::uint64_t(f.get_int(key)); });
            expect_error_or_value([&] { g_sink = g_sink + f.get_string(key).size(); });
            expect_error_or_value([&] { g_sink = g_sink + (f.get_float(key) == 0.0); });
            expect_error_or_value([&] { g_sink = g_sink + f.get_bool(key); });
        }
        for (const auto& t : f.tensors()) {
            if (f.find_tensor(t.name) != &t) finding("tensor lookup");
            if (t.shape.empty() || t.shape.size() > std::size_t(smol::gguf::kMaxDims)) finding("tensor rank");
            if (t.n_bytes == 0 || !inside(f, t.data, std::size_t(t.n_bytes))) finding("tensor data outside the file");
            if ((t.data - f.memory().data()) % std::ptrdiff_t(f.alignment()) != 0) finding("tensor data misaligned");
            g_sink = g_sink + t.data[0] + t.data[t.n_bytes - 1] + t.row_bytes() + t.shape_string().size();
        }
    } catch (const smol::Error&) {
        // Rejecting a malformed file is the expected outcome for most inputs.
    }
    return 0;
}
