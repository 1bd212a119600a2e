// GGUF reader and writer: a full round trip through every value type and several tensor types,
// a catalogue of broken files that must each be rejected with a message naming the file, the
// key or tensor and the offset, sweeps over truncated and corrupted files (run under ASan in
// CI), and the reference fixtures.

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/platform.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/gguf/writer.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_gguf {

using smol::TensorType;
using smol::gguf::File;
using smol::gguf::ValueType;
using smol::gguf::Writer;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Builds GGUF images byte by byte, so broken files can be made with exact control and the
// offsets a message must report are taken from the builder rather than typed in by hand.
struct Raw {
    Bytes b;
    std::size_t size() const { return b.size(); }
    template <class T>
    Raw& put(T v) {
        const auto at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Raw& u8(std::uint8_t v) { return put(v); }
    Raw& u32(std::uint32_t v) { return put(v); }
    Raw& u64(std::uint64_t v) { return put(v); }
    Raw& i64(std::int64_t v) { return put(v); }
    Raw& str(std::string_view s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& type(ValueType t) { return u32(std::uint32_t(t)); }
    Raw& pad_to(std::size_t alignment) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    Raw& zeros(std::size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
    // magic, version, tensor count, metadata count
    static Raw header(std::uint64_t tensors, std::uint64_t kvs, std::uint32_t version = 3) {
        Raw r;
        r.u32(smol::gguf::kMagic).u32(version).u64(tensors).u64(kvs);
        return r;
    }
    // One tensor entry: name, dims, type, offset.
    Raw& tensor(std::string_view name, std::initializer_list<std::int64_t> shape, std::uint32_t type, std::uint64_t offset) {
        str(name).u32(std::uint32_t(shape.size()));
        for (auto d : shape) i64(d);
        return u32(type).u64(offset);
    }
};

std::string error_of(const Bytes& bytes, const std::string& name) {
    try {
        File::from_bytes(bytes, name);
    } catch (const smol::Error& e) {
        return e.what();
    }
    return "(no error)";
}

// The file must be rejected with a smol::Error whose message names the file and holds each part.
void expect_rejected(const Bytes& bytes, const std::string& name, std::initializer_list<std::string> parts) {
    const std::string message = error_of(bytes, name);
    INFO("file: ", name, "\nmessage: ", message);
    CHECK(message.find(name + ":") != std::string::npos);
    for (const auto& part : parts) {
        INFO("expected the message to contain: ", part);
        CHECK(message.find(part) != std::string::npos);
    }
}

std::string at(std::size_t offset) { return "offset " + std::to_string(offset); }

template <class T>
Bytes raw_bytes_of(const std::vector<T>& v) {
    Bytes out(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

// Deterministic tensor contents, different per tensor so a swapped offset shows.
Bytes pattern(std::size_t n, unsigned seed) {
    Bytes out(n);
    std::uint32_t x = 2463534242u ^ (seed * 0x9E3779B9u);
    for (auto& byte : out) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        byte = std::uint8_t(x >> 24);
    }
    return out;
}

struct ExpectedTensor {
    std::string name;
    TensorType type;
    std::vector<std::int64_t> shape;
    std::uint64_t n_bytes;  // worked out by hand from the block sizes
};

// F32 [8,3]: 24*4; F16 [32,2]: 64*2; Q4_K [256,2]: 2 blocks*144; Q6_K [512]: 2 blocks*210;
// Q8_0 [64,3,2]: 12 blocks*34; F32 [5]: 5*4 (odd size so the next offset needs padding).
const std::vector<ExpectedTensor> kTensors = {
    {"w.f32", TensorType::F32, {8, 3}, 96},
    {"w.f16", TensorType::F16, {32, 2}, 128},
    {"w.q4_k", TensorType::Q4_K, {256, 2}, 288},
    {"w.q6_k", TensorType::Q6_K, {512}, 420},
    {"w.small", TensorType::F32, {5}, 20},
    {"w.q8_0", TensorType::Q8_0, {64, 3, 2}, 408},
};

const std::vector<std::string> kStrings = {"alpha", "", "ünïcødé ✓", std::string("nul\0inside", 10)};
const std::vector<std::int32_t> kInner0 = {1, -2, 3};
const std::vector<std::int32_t> kInner1 = {};
const std::vector<std::int32_t> kInner2 = {2147483647};

// A nested array as gguf-py writes it: [array] of 3 x (i32 element type, count, items).
Bytes nested_payload() {
    Raw r;
    r.type(ValueType::Array).u64(3);
    for (const auto* inner : {&kInner0, &kInner1, &kInner2}) {
        r.type(ValueType::I32).u64(inner->size());
        for (auto v : *inner) r.put(v);
    }
    return r.b;
}

// [array of 2 x [array of 1 x [string]]]: three levels, strings at the bottom.
Bytes deep_string_payload() {
    Raw r;
    r.type(ValueType::Array).u64(2);
    for (int i = 0; i < 2; ++i) {
        r.type(ValueType::Array).u64(1);
        r.type(ValueType::String).u64(2).str("x" + std::to_string(i)).str("y");
    }
    return r.b;
}

Writer make_writer(std::uint32_t version, std::uint64_t alignment) {
    Writer w(version, alignment);
    w.set("v.u8", ValueType::U8, std::uint8_t(200));
    w.set("v.i8", ValueType::I8, std::int8_t(-100));
    w.set("v.u16", ValueType::U16, std::uint16_t(60000));
    w.set("v.i16", ValueType::I16, std::int16_t(-30000));
    w.set_u32("v.u32", 4000000000u);
    w.set_i32("v.i32", -2000000000);
    w.set_u64("v.u64", (std::uint64_t(1) << 63) + 5);
    w.set("v.i64", ValueType::I64, std::int64_t(-(std::int64_t(1) << 62) - 7));
    w.set_f32("v.f32", 1.5f);
    w.set("v.f64", ValueType::F64, -2.25e300);
    w.set_bool("v.true", true);
    w.set_bool("v.false", false);
    w.set_string("v.string", "SmolLM3 \xF0\x9F\xA4\x97");
    w.set_string("v.empty_string", "");
    w.set_array("a.u8", ValueType::U8, std::vector<std::uint8_t>{0, 1, 255});
    w.set_array("a.i8", ValueType::I8, std::vector<std::int8_t>{-128, 0, 127});
    w.set_array("a.u16", ValueType::U16, std::vector<std::uint16_t>{65535, 7});
    w.set_array("a.i16", ValueType::I16, std::vector<std::int16_t>{-32768, 32767});
    w.set_array("a.u32", ValueType::U32, std::vector<std::uint32_t>{4294967295u, 0, 12});
    w.set_array("a.i32", ValueType::I32, std::vector<std::int32_t>{-5, 6, -7, 8});
    w.set_array("a.u64", ValueType::U64, std::vector<std::uint64_t>{1, 1ull << 40});
    w.set_array("a.i64", ValueType::I64, std::vector<std::int64_t>{-(1ll << 50), 3});
    w.set_array("a.f32", ValueType::F32, std::vector<float>{0.25f, -1e-3f, 3e38f});
    w.set_array("a.f64", ValueType::F64, std::vector<double>{1e-300, -0.5});
    w.set_array("a.bool", ValueType::Bool, std::vector<std::uint8_t>{1, 0, 1});
    w.set_array("a.empty", ValueType::F32, std::vector<float>{});
    w.set_string_array("a.strings", kStrings);
    w.set_raw("a.nested", std::uint32_t(ValueType::Array), nested_payload());
    w.set_raw("a.deep", std::uint32_t(ValueType::Array), deep_string_payload());
    for (std::size_t i = 0; i < kTensors.size(); ++i) {
        const auto& t = kTensors[i];
        if (i == 2) {  // one tensor through the streaming producer path
            w.add_tensor(t.name, t.type, t.shape, [n = t.n_bytes, i] { return pattern(n, unsigned(i)); });
        } else {
            w.add_tensor(t.name, t.type, t.shape, pattern(t.n_bytes, unsigned(i)));
        }
    }
    return w;
}

void check_round_trip(const File& f, std::uint32_t version, std::uint64_t alignment, bool mapped) {
    CHECK(f.version() == version);
    CHECK(f.alignment() == alignment);
    CHECK(f.data_offset() % alignment == 0);

    CHECK(f.get_int("v.u8") == 200);
    CHECK(f.get_int("v.i8") == -100);
    CHECK(f.get_int("v.u16") == 60000);
    CHECK(f.get_int("v.i16") == -30000);
    CHECK(f.get_int("v.u32") == 4000000000ll);
    CHECK(f.get_int("v.i32") == -2000000000);
    CHECK(f.require("v.u64").as_uint() == (std::uint64_t(1) << 63) + 5);
    CHECK_THROWS_AS(f.get_int("v.u64"), smol::Error);  // does not fit an int64: no silent wrap
    CHECK(f.get_int("v.i64") == -(std::int64_t(1) << 62) - 7);
    CHECK(f.get_float("v.f32") == 1.5);
    CHECK(f.get_float("v.f64") == -2.25e300);
    CHECK(f.get_float("v.i16") == -30000.0);
    CHECK(f.get_bool("v.true") == true);
    CHECK(f.get_bool("v.false") == false);
    CHECK(f.get_string("v.string") == "SmolLM3 \xF0\x9F\xA4\x97");
    CHECK(f.get_string("v.empty_string").empty());
    CHECK(f.get_string_or("v.missing", "fallback") == "fallback");
    CHECK(f.get_string_or("v.u8", "fallback") == "fallback");

    const std::pair<const char*, ValueType> scalar_types[] = {
        {"v.u8", ValueType::U8},   {"v.i8", ValueType::I8},   {"v.u16", ValueType::U16}, {"v.i16", ValueType::I16},
        {"v.u32", ValueType::U32}, {"v.i32", ValueType::I32}, {"v.u64", ValueType::U64}, {"v.i64", ValueType::I64},
        {"v.f32", ValueType::F32}, {"v.f64", ValueType::F64}, {"v.true", ValueType::Bool}, {"v.string", ValueType::String}};
    for (auto [key, type] : scalar_types) {
        INFO(key);
        CHECK(f.require(key).type() == type);
        CHECK_FALSE(f.require(key).is_array());
    }

    CHECK(f.require("a.u8").ints() == std::vector<std::int64_t>{0, 1, 255});
    CHECK(f.require("a.i8").ints() == std::vector<std::int64_t>{-128, 0, 127});
    CHECK(f.require("a.u16").ints() == std::vector<std::int64_t>{65535, 7});
    CHECK(f.require("a.i16").ints() == std::vector<std::int64_t>{-32768, 32767});
    CHECK(f.require("a.u32").ints() == std::vector<std::int64_t>{4294967295ll, 0, 12});
    CHECK(f.require("a.i32").ints() == std::vector<std::int64_t>{-5, 6, -7, 8});
    CHECK(f.require("a.u64").ints() == std::vector<std::int64_t>{1, 1ll << 40});
    CHECK(f.require("a.i64").ints() == std::vector<std::int64_t>{-(1ll << 50), 3});
    CHECK(f.require("a.f32").floats() == std::vector<double>{0.25f, -1e-3f, 3e38f});
    CHECK(f.require("a.f64").floats() == std::vector<double>{1e-300, -0.5});
    CHECK(f.require("a.i32").floats() == std::vector<double>{-5, 6, -7, 8});
    CHECK(f.require("a.bool").ints() == std::vector<std::int64_t>{1, 0, 1});
    CHECK(f.require("a.bool").element_type() == ValueType::Bool);
    CHECK(f.require("a.empty").size() == 0);
    CHECK(f.require("a.empty").floats().empty());
    CHECK(f.require("a.f32").element_type() == ValueType::F32);
    CHECK(f.require("a.f32").describe_type() == "array of 3 f32");
    CHECK_THROWS_AS(f.require("a.f32").strings(), smol::Error);
    CHECK_THROWS_AS(f.require("a.f32").ints(), smol::Error);
    CHECK_THROWS_AS(f.require("a.strings").floats(), smol::Error);

    const auto& strings = f.require("a.strings").strings();
    REQUIRE(strings.size() == kStrings.size());
    for (std::size_t i = 0; i < strings.size(); ++i) CHECK(std::string(strings[i]) == kStrings[i]);

    const auto& nested = f.require("a.nested");
    REQUIRE(nested.is_array());
    CHECK(nested.element_type() == ValueType::Array);
    REQUIRE(nested.size() == 3);
    const auto& inner = nested.array_data()->nested;
    REQUIRE(inner.size() == 3);
    CHECK(inner[0].ints() == std::vector<std::int64_t>(kInner0.begin(), kInner0.end()));
    CHECK(inner[1].ints().empty());
    CHECK(inner[2].ints() == std::vector<std::int64_t>(kInner2.begin(), kInner2.end()));

    const auto& deep = f.require("a.deep").array_data()->nested;
    REQUIRE(deep.size() == 2);
    for (int i = 0; i < 2; ++i) {
        const auto& level2 = deep[i].array_data()->nested;
        REQUIRE(level2.size() == 1);
        CHECK(level2[0].strings() == std::vector<std::string_view>{i == 0 ? "x0" : "x1", "y"});
    }

    // Metadata keeps file order: the alignment key (if any) first, then the keys as set.
    const auto& meta = f.metadata();
    const bool has_alignment_key = alignment != smol::gguf::kDefaultAlignment;
    CHECK(meta.size() == 29u + (has_alignment_key ? 1 : 0));
    if (has_alignment_key) {
        CHECK(meta.front().first == "general.alignment");
        CHECK(meta.front().second.type() == ValueType::U32);
    } else {
        CHECK(f.find("general.alignment") == nullptr);
    }
    CHECK(meta.back().first == "a.deep");

    REQUIRE(f.tensors().size() == kTensors.size());
    std::uint64_t expected_offset = 0;
    for (std::size_t i = 0; i < kTensors.size(); ++i) {
        const auto& want = kTensors[i];
        const auto& got = f.tensors()[i];
        INFO("tensor ", want.name);
        CHECK(got.name == want.name);
        CHECK(&f.tensor(want.name) == &got);
        CHECK(got.type == want.type);
        CHECK(got.shape == want.shape);
        CHECK(got.n_bytes == want.n_bytes);
        std::uint64_t elements = 1;
        for (auto d : want.shape) elements *= std::uint64_t(d);
        CHECK(got.n_elements == elements);
        CHECK(got.offset == expected_offset);
        CHECK(got.row_bytes() == want.n_bytes / std::uint64_t(got.rows()));
        CHECK(got.data == f.memory().data() + f.data_offset() + got.offset);
        CHECK(std::uint64_t(got.data - f.memory().data()) % alignment == 0);
        // An mmap starts on a page, so the pointers themselves are aligned; an owned buffer
        // only guarantees the offsets within it.
        if (mapped) CHECK(reinterpret_cast<std::uintptr_t>(got.data) % alignment == 0);
        const Bytes expected = pattern(want.n_bytes, unsigned(i));
        CHECK(std::memcmp(got.data, expected.data(), expected.size()) == 0);
        expected_offset = (expected_offset + want.n_bytes + alignment - 1) / alignment * alignment;
    }
    const auto& last = f.tensors().back();
    CHECK(f.file_size() == f.data_offset() + last.offset + last.n_bytes);
}

struct TempFile {
    std::filesystem::path path;
    explicit TempFile(const std::string& stem)
        : path(std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + ".gguf")) {}
    ~TempFile() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};

Bytes read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A small valid file: one string key and one F32 tensor of 8 elements, default alignment.
Bytes small_valid_file() {
    Raw r = Raw::header(1, 1);
    r.str("general.architecture").type(ValueType::String).str("test");
    r.tensor("t", {8}, 0, 0).pad_to(32);
    const Bytes data = pattern(32, 9);
    r.b.insert(r.b.end(), data.begin(), data.end());
    return r.b;
}

}  // namespace

TEST_CASE("gguf round trip: every value type, five tensor types, v2 and v3, custom alignment") {
    for (std::uint32_t version : {2u, 3u}) {
        for (std::uint64_t alignment : {std::uint64_t(32), std::uint64_t(64), std::uint64_t(256)}) {
            CAPTURE(version);
            CAPTURE(alignment);
            const Writer w = make_writer(version, alignment);
            const Bytes image = w.to_bytes();

            SUBCASE("from_bytes") { check_round_trip(File::from_bytes(image, "round-trip.gguf"), version, alignment, false); }
            SUBCASE("open (mmap)") {
                TempFile tmp("smol-test-gguf-v" + std::to_string(version) + "-a" + std::to_string(alignment));
                w.write(tmp.path);
                CHECK(read_all(tmp.path) == image);  // streaming write and in-memory image agree
                const File f = File::open(tmp.path);
                CHECK(f.name() == tmp.path.string());
                check_round_trip(f, version, alignment, true);
            }
        }
    }
}

TEST_CASE("gguf values outlive moves of the File") {
    const Bytes image = make_writer(3, 64).to_bytes();
    File moved = File::from_bytes(image, "moved.gguf");
    File f = std::move(moved);
    check_round_trip(f, 3, 64, false);
}

TEST_CASE("gguf file that does not exist names the path") {
    const std::string path = "/nonexistent-dir/smol-missing.gguf";
    try {
        File::open(path);
        FAIL("expected an error");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
    CHECK_THROWS_AS(File::open(std::filesystem::temp_directory_path()), smol::Error);  // a directory

    // An empty file on disk maps nothing; the reader must still reject it cleanly.
    TempFile empty("smol-test-gguf-empty");
    std::ofstream(empty.path, std::ios::binary).close();
    try {
        File::open(empty.path);
        FAIL("expected an error");
    } catch (const smol::Error& e) {
        const std::string m = e.what();
        CHECK(m.find(empty.path.string() + ": truncated at offset 0") != std::string::npos);
    }
}

TEST_CASE("gguf broken headers") {
    expect_rejected({}, "empty.gguf", {"truncated at offset 0", "magic"});
    {
        Raw r = Raw::header(0, 0);
        std::memcpy(r.b.data(), "GGML", 4);
        expect_rejected(r.b, "bad-magic.gguf", {"expected magic 'GGUF' at offset 0", "found 'GGML'"});
    }
    expect_rejected(Raw::header(0, 0, 1).b, "version-1.gguf", {"version 1", at(4)});
    expect_rejected(Raw::header(0, 0, 99).b, "version-99.gguf", {"version 99", at(4)});
    expect_rejected(Raw::header(0, 0, 0x03000000).b, "big-endian.gguf", {"big-endian", at(4)});
    {
        Raw r = Raw::header(0, 0);
        r.b.resize(12);  // cut inside the tensor count
        expect_rejected(r.b, "cut-header.gguf", {"truncated at offset 8", "tensor count"});
        r = Raw::header(0, 0);
        r.b.resize(20);  // cut inside the metadata count
        expect_rejected(r.b, "cut-header2.gguf", {"truncated at offset 16", "metadata count"});
    }
    {
        Raw r = Raw::header(0, std::uint64_t(1) << 60);
        r.zeros(64);
        expect_rejected(r.b, "many-keys.gguf", {"metadata count 1152921504606846976", at(16)});
        r = Raw::header(std::uint64_t(-1), 0);
        r.zeros(64);
        expect_rejected(r.b, "many-tensors.gguf", {"tensor count 18446744073709551615", at(8)});
    }
    // A valid empty file (no tensors, no keys) is fine.
    const File empty = File::from_bytes(Raw::header(0, 0).b, "empty-ok.gguf");
    CHECK(empty.tensors().empty());
    CHECK(empty.metadata().empty());
}

TEST_CASE("gguf broken metadata") {
    SUBCASE("truncated in a key") {
        Raw r = Raw::header(0, 1);
        const auto key_at = r.size();
        r.u64(100).zeros(10);  // enough bytes that the count is plausible, too few for the key
        expect_rejected(r.b, "cut-key.gguf", {"string length 100", "metadata key", "metadata entry 0", at(key_at)});
        // Cut inside the second key's length: the first entry makes two entries plausible.
        r = Raw::header(0, 2);
        r.str("general.name").type(ValueType::String).str("a name long enough");
        const auto second_at = r.size();
        r.u32(5);  // half a length
        expect_rejected(r.b, "cut-key-length.gguf", {"truncated at " + at(second_at), "metadata entry 1"});
    }
    SUBCASE("truncated before the value type") {
        Raw r = Raw::header(0, 1);
        r.str("general.name").zeros(2);
        const auto type_at = r.size() - 2;
        expect_rejected(r.b, "cut-type.gguf", {"truncated at " + at(type_at), "'general.name'", "value type"});
    }
    SUBCASE("truncated in a string value") {
        Raw r = Raw::header(0, 1);
        r.str("general.name").type(ValueType::String);
        const auto value_at = r.size();
        r.u64(10).b.insert(r.b.end(), {'S', 'm', 'o'});
        expect_rejected(r.b, "cut-string.gguf", {"string length 10", "'general.name'", at(value_at)});
    }
    SUBCASE("string length past the end of the file") {
        Raw r = Raw::header(0, 1);
        r.str("general.name").type(ValueType::String);
        const auto value_at = r.size();
        r.u64(std::uint64_t(-2)).zeros(16);
        expect_rejected(r.b, "huge-string.gguf", {"string length 18446744073709551614", "'general.name'", at(value_at)});
    }
    SUBCASE("truncated scalar") {
        Raw r = Raw::header(0, 1);
        r.str("x.f64").type(ValueType::F64);
        const auto value_at = r.size();
        r.zeros(5);
        expect_rejected(r.b, "cut-scalar.gguf", {"truncated at " + at(value_at), "'x.f64'"});
    }
    SUBCASE("array that cannot fit") {
        Raw r = Raw::header(0, 1);
        r.str("a.u32").type(ValueType::Array).type(ValueType::U32);
        const auto count_at = r.size();
        r.u64(4).u32(1).u32(2);
        expect_rejected(r.b, "cut-array.gguf", {"'a.u32'", "array of 4 u32", at(count_at)});
        r = Raw::header(0, 1);
        r.str("a.huge").type(ValueType::Array).type(ValueType::String).u64(std::uint64_t(1) << 61).zeros(100);
        expect_rejected(r.b, "huge-array.gguf", {"'a.huge'", "array of 2305843009213693952 string", at(count_at + 1)});
    }
    SUBCASE("truncated in an array of strings") {
        Raw r = Raw::header(0, 1);
        r.str("tokenizer.ggml.tokens").type(ValueType::Array).type(ValueType::String).u64(3).str("hello").str("world");
        const auto third_at = r.size();
        r.u64(4).u8('a');  // the third string is cut short
        r.zeros(0);
        expect_rejected(r.b, "cut-string-array.gguf",
                        {"string length 4", "'tokenizer.ggml.tokens'", at(third_at)});
        r.b.resize(third_at + 3);  // cut inside the third string's length
        expect_rejected(r.b, "cut-string-array2.gguf", {"truncated at " + at(third_at), "'tokenizer.ggml.tokens'"});
    }
    SUBCASE("truncated in a nested array") {
        Raw r = Raw::header(0, 1);
        r.str("a.nested").type(ValueType::Array).type(ValueType::Array).u64(2);
        r.type(ValueType::U8).u64(2).u8(1).u8(2);
        const auto second_at = r.size();
        r.type(ValueType::U8).u64(9).u8(1);
        expect_rejected(r.b, "cut-nested.gguf", {"'a.nested'", "array of 9 u8", at(second_at + 4)});
    }
    SUBCASE("unknown value type") {
        Raw r = Raw::header(0, 1);
        r.str("x.odd");
        const auto type_at = r.size();
        r.u32(13).zeros(8);
        expect_rejected(r.b, "unknown-type.gguf", {"'x.odd'", "unknown value type 13", at(type_at)});
        r = Raw::header(0, 1);
        r.str("x.odd").type(ValueType::Array);
        r.u32(0xFFFFFFFF).u64(1).zeros(8);
        expect_rejected(r.b, "unknown-element-type.gguf", {"'x.odd'", "unknown value type 4294967295", at(type_at + 4)});
    }
    SUBCASE("empty key") {
        Raw r = Raw::header(0, 1);
        const auto key_at = r.size();
        r.str("").type(ValueType::U8).u8(1);
        expect_rejected(r.b, "empty-key.gguf", {"empty metadata key", at(key_at)});
    }
    SUBCASE("duplicate key") {
        Raw r = Raw::header(0, 2);
        r.str("general.name").type(ValueType::String).str("a");
        const auto second_at = r.size();
        r.str("general.name").type(ValueType::U32).u32(7);
        expect_rejected(r.b, "duplicate-key.gguf", {"duplicate metadata key 'general.name'", at(second_at)});
    }
    SUBCASE("bool value not 0 or 1") {
        Raw r = Raw::header(0, 1);
        r.str("x.flag").type(ValueType::Bool);
        const auto value_at = r.size();
        r.u8(2);
        expect_rejected(r.b, "bad-bool.gguf", {"'x.flag'", "expected a bool (0 or 1), found 2", at(value_at)});
        r = Raw::header(0, 1);
        r.str("x.flags").type(ValueType::Array).type(ValueType::Bool).u64(3);
        const auto elements_at = r.size();
        r.u8(1).u8(0).u8(0xFF);
        expect_rejected(r.b, "bad-bool-array.gguf", {"'x.flags'", "element 2", "found 255", at(elements_at + 2)});
    }
    SUBCASE("arrays nested too deep") {
        // kMaxArrayNesting levels are fine, one more is rejected.
        auto nest = [](int levels) {
            Raw r = Raw::header(0, 1);
            r.str("x.deep").type(ValueType::Array);
            for (int i = 1; i < levels; ++i) r.type(ValueType::Array).u64(1);
            r.type(ValueType::U8).u64(1).u8(42);
            return r.b;
        };
        const File ok = File::from_bytes(nest(smol::gguf::kMaxArrayNesting), "deep-ok.gguf");
        const smol::gguf::Value* v = &ok.require("x.deep");
        for (int i = 1; i < smol::gguf::kMaxArrayNesting; ++i) v = &v->array_data()->nested.at(0);
        CHECK(v->ints() == std::vector<std::int64_t>{42});
        expect_rejected(nest(smol::gguf::kMaxArrayNesting + 1), "too-deep.gguf",
                        {"'x.deep'", "nested deeper than " + std::to_string(smol::gguf::kMaxArrayNesting), "offset"});
    }
    SUBCASE("bad alignment") {
        auto with_alignment = [](ValueType type, std::uint64_t value) {
            Raw r = Raw::header(0, 1);
            r.str("general.alignment").type(type);
            if (type == ValueType::U64) r.u64(value);
            else if (type == ValueType::String) r.str("32");
            else r.u32(std::uint32_t(value));
            return r.b;
        };
        expect_rejected(with_alignment(ValueType::U32, 0), "alignment-0.gguf", {"'general.alignment'", "power of two, found 0"});
        expect_rejected(with_alignment(ValueType::U32, 3), "alignment-3.gguf", {"'general.alignment'", "power of two, found 3"});
        expect_rejected(with_alignment(ValueType::U64, 32), "alignment-u64.gguf", {"'general.alignment'", "expected a u32, found u64"});
        expect_rejected(with_alignment(ValueType::String, 0), "alignment-string.gguf",
                        {"'general.alignment'", "expected a u32, found string"});
        CHECK(File::from_bytes(with_alignment(ValueType::U32, 16), "alignment-16.gguf").alignment() == 16);
    }
}

TEST_CASE("gguf broken tensor table") {
    // Each case: one key, then the tensor entries, then a data section of `data_bytes`.
    auto file_with = [](auto&& add_tensors, std::size_t data_bytes, std::uint64_t tensors = 1) {
        Raw r = Raw::header(tensors, 1);
        r.str("general.architecture").type(ValueType::String).str("test");
        add_tensors(r);
        r.pad_to(32).zeros(data_bytes);
        return r.b;
    };
    const std::size_t entry_at = Raw::header(1, 1).str("general.architecture").type(ValueType::String).str("test").size();
    const std::string entry = "entry at " + at(entry_at);

    SUBCASE("truncated in the tensor table") {
        Raw r = Raw::header(2, 1);
        r.str("general.architecture").type(ValueType::String).str("test");
        r.tensor("blk.0.attn_q.weight", {256, 4}, 12, 0).str("blk.0.attn_k.weight").u32(2).i64(256).zeros(20);
        const auto second_at = entry_at + 8 + 19 + 4 + 16 + 4 + 8;
        r.b.resize(second_at + 8 + 19 + 4 + 8 + 4);  // cut inside the second dimension
        expect_rejected(r.b, "cut-tensor.gguf",
                        {"truncated at " + at(second_at + 8 + 19 + 4 + 8), "'blk.0.attn_k.weight'", "entry at " + at(second_at)});
        r.b.resize(second_at + 6);  // cut inside the name length
        expect_rejected(r.b, "cut-tensor-name.gguf", {"truncated at " + at(second_at), "tensor entry 1"});
    }
    SUBCASE("tensor name past the end of the file") {
        Raw r = Raw::header(1, 0);
        r.u64(1000).zeros(40);
        expect_rejected(r.b, "huge-name.gguf", {"string length 1000", "tensor name", at(24)});
    }
    SUBCASE("empty tensor name") {
        expect_rejected(file_with([](Raw& r) { r.tensor("", {8}, 0, 0); }, 32), "empty-tensor-name.gguf",
                        {"empty tensor name", entry});
    }
    SUBCASE("unknown tensor type") {
        const std::size_t type_at = entry_at + 8 + 1 + 4 + 8;
        expect_rejected(file_with([](Raw& r) { r.tensor("t", {32}, 99, 0); }, 128), "type-99.gguf",
                        {"'t'", "unknown tensor type 99", at(type_at)});
        // 4 and 5 were Q4_2 and Q4_3, removed from ggml: a gap in the ids, not a type.
        expect_rejected(file_with([](Raw& r) { r.tensor("t", {32}, 4, 0); }, 128), "type-4.gguf",
                        {"'t'", "unknown tensor type 4", at(type_at)});
    }
    SUBCASE("zero or negative dimension") {
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {8, 0}, 0, 0); }, 32), "dim-zero.gguf",
                        {"'w'", entry, "dimension 1 must be positive, found 0"});
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {-8}, 0, 0); }, 32), "dim-negative.gguf",
                        {"'w'", entry, "dimension 0 must be positive, found -8"});
    }
    SUBCASE("dimension count") {
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {1, 1, 1, 1, 1}, 0, 0); }, 32), "five-dims.gguf",
                        {"'w'", entry, "expected 1 to 4 dimensions, found 5"});
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {}, 0, 0); }, 32), "zero-dims.gguf",
                        {"'w'", entry, "found 0"});
        // A huge count must not make the reader loop reading dimensions.
        expect_rejected(file_with([](Raw& r) { r.str("w").u32(0xFFFFFFFF).zeros(16); }, 32), "many-dims.gguf",
                        {"'w'", entry, "found 4294967295"});
    }
    SUBCASE("element count overflow") {
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {1ll << 32, 1ll << 32}, 0, 0); }, 32), "elements.gguf",
                        {"'w'", entry, "element count overflows"});
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {2, 2, 1ll << 62, 1}, 0, 0); }, 32), "elements2.gguf",
                        {"'w'", entry, "element count overflows"});
    }
    SUBCASE("byte size overflow") {
        // 2^62 F32 elements fit an int64, their 2^64 bytes do not.
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {1ll << 62}, 0, 0); }, 32), "bytes.gguf",
                        {"'w'", entry, "byte size overflows"});
        // 2^61 elements of F64: 2^64 bytes again.
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {1ll << 31, 1ll << 30}, 28, 0); }, 32), "bytes2.gguf",
                        {"'w'", entry, "byte size overflows"});
    }
    SUBCASE("first dimension not a multiple of the block size") {
        expect_rejected(file_with([](Raw& r) { r.tensor("blk.0.ffn_up.weight", {100, 2}, 12, 0); }, 288),
                        "q4k-100.gguf", {"'blk.0.ffn_up.weight'", entry, "first dimension 100", "Q4_K block size 256"});
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {48}, 8, 0); }, 68), "q80-48.gguf",
                        {"'w'", entry, "Q8_0 block size 32"});
    }
    SUBCASE("tensor data past the end of the file") {
        // 16 F32 = 64 bytes, only 32 present.
        auto b = file_with([](Raw& r) { r.tensor("w", {16}, 0, 0); }, 32);
        expect_rejected(b, "short-data.gguf", {"'w'", entry, "64 bytes at data offset 0", "run past the end", "size " + std::to_string(b.size())});
        // An offset far beyond the file, which must not overflow when added.
        const std::uint64_t far = std::uint64_t(-32);
        b = file_with([far](Raw& r) { r.tensor("w", {8}, 0, far); }, 32);
        expect_rejected(b, "far-offset.gguf", {"'w'", entry, "data offset " + std::to_string(far), "run past the end"});
        // Second tensor overlaps the end.
        b = file_with([](Raw& r) { r.tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 32); }, 48, 2);
        expect_rejected(b, "second-short.gguf", {"'b'", "32 bytes at data offset 32", "run past the end"});
    }
    SUBCASE("data section past the end of the file") {
        Raw r = Raw::header(1, 0);
        r.tensor("w", {1}, 0, 0);  // header ends unaligned and nothing follows
        expect_rejected(r.b, "no-data.gguf", {"data section should start at " + at(64), "only " + std::to_string(r.size())});
    }
    SUBCASE("misaligned tensor offset") {
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {8}, 0, 4); }, 64), "misaligned.gguf",
                        {"'w'", entry, "data offset 4", "alignment 32"});
    }
    SUBCASE("duplicate tensor name") {
        const std::size_t second_at = entry_at + 8 + 1 + 4 + 8 + 4 + 8;
        expect_rejected(file_with([](Raw& r) { r.tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32); }, 64, 2),
                        "duplicate-tensor.gguf", {"duplicate tensor name 'w'", at(second_at)});
    }
    SUBCASE("a well-formed file built the same way parses") {
        const File f = File::from_bytes(file_with([](Raw& r) { r.tensor("a", {8}, 0, 0).tensor("b", {256}, 14, 32); }, 32 + 224, 2),
                                        "good.gguf");
        REQUIRE(f.tensors().size() == 2);
        CHECK(f.tensor("b").type == TensorType::Q6_K);
        CHECK(f.tensor("b").n_bytes == 210);
        CHECK(f.tensor("b").info_offset == entry_at + 8 + 1 + 4 + 8 + 4 + 8);
    }
}

TEST_CASE("gguf lookups name the file and the key or tensor") {
    const File f = File::from_bytes(small_valid_file(), "lookups.gguf");
    auto message = [](auto&& call) -> std::string {
        try {
            call();
        } catch (const smol::Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    const auto contains = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };

    std::string m = message([&] { f.get_int("llama.block_count"); });
    CHECK(contains(m, "lookups.gguf"));
    CHECK(contains(m, "missing required metadata key 'llama.block_count'"));
    m = message([&] { f.get_string("tokenizer.ggml.model"); });
    CHECK(contains(m, "lookups.gguf"));
    CHECK(contains(m, "'tokenizer.ggml.model'"));
    m = message([&] { f.require("general.name"); });
    CHECK(contains(m, "'general.name'"));
    m = message([&] { f.get_float("x"); });
    CHECK(contains(m, "'x'"));
    m = message([&] { f.get_bool("general.architecture"); });
    CHECK(contains(m, "'general.architecture'"));
    CHECK(contains(m, "expected a bool, found string"));
    m = message([&] { f.get_int("general.architecture"); });
    CHECK(contains(m, "lookups.gguf"));
    CHECK(contains(m, "expected an integer, found string"));

    const File g = File::from_bytes(make_writer(3, 32).to_bytes(), "types.gguf");
    m = message([&] { g.get_string("v.u32"); });
    CHECK(contains(m, "types.gguf"));
    CHECK(contains(m, "'v.u32'"));
    CHECK(contains(m, "expected a string, found u32"));
    m = message([&] { g.get_string("a.strings"); });
    CHECK(contains(m, "expected a string, found array of 4 string"));
    m = message([&] { g.get_int("v.f32"); });
    CHECK(contains(m, "expected an integer, found f32"));
    m = message([&] { g.get_float("v.string"); });
    CHECK(contains(m, "expected a number"));

    m = message([&] { f.tensor("output.weight"); });
    CHECK(contains(m, "lookups.gguf"));
    CHECK(contains(m, "missing required tensor 'output.weight'"));
    CHECK(f.find_tensor("output.weight") == nullptr);
    CHECK(f.find_tensor("t") != nullptr);
    CHECK(f.find("missing") == nullptr);
}

// Every prefix of a valid file either parses or throws smol::Error; under ASan this also
// proves no prefix makes the reader touch a byte past the end.
TEST_CASE("gguf truncation sweep") {
    for (const Bytes& image : {small_valid_file(), make_writer(3, 64).to_bytes(), make_writer(2, 32).to_bytes()}) {
        const File whole = File::from_bytes(image, "whole.gguf");
        std::uint64_t needed = whole.data_offset();
        for (const auto& t : whole.tensors()) needed = std::max(needed, whole.data_offset() + t.offset + t.n_bytes);
        CHECK(needed == image.size());
        std::size_t parsed = 0;
        for (std::size_t n = 0; n < image.size(); ++n) {
            // An exact-size heap copy so ASan sees the end of the buffer.
            Bytes prefix(image.begin(), image.begin() + std::ptrdiff_t(n));
            try {
                File::from_bytes(std::move(prefix), "prefix.gguf");
                ++parsed;
            } catch (const smol::Error& e) {
                if (std::string(e.what()).rfind("prefix.gguf: ", 0) != 0) FAIL("message does not name the file: ", e.what());
            }
        }
        // Every tensor has data, so no strict prefix can hold them all.
        CHECK(parsed == 0);
    }
}

// Corrupt each header byte in turn (to 0x00, 0xFF and a bit flip); every result must parse
// or be rejected cleanly, and whatever parses must keep its tensors inside the file.
TEST_CASE("gguf corruption sweep") {
    const Bytes image = make_writer(3, 32).to_bytes();
    const std::size_t header_bytes = std::size_t(File::from_bytes(image, "x.gguf").data_offset());
    std::size_t parsed = 0, rejected = 0;
    for (std::size_t i = 0; i < header_bytes; ++i) {
        for (int variant = 0; variant < 3; ++variant) {
            Bytes corrupt = image;
            corrupt[i] = variant == 0 ? 0x00 : variant == 1 ? 0xFF : std::uint8_t(corrupt[i] ^ 0x10);
            if (corrupt[i] == image[i]) continue;
            try {
                const File f = File::from_bytes(std::move(corrupt), "corrupt.gguf");
                ++parsed;
                for (const auto& t : f.tensors()) {
                    CHECK(t.data >= f.memory().data() + f.data_offset());
                    CHECK(t.data + t.n_bytes <= f.memory().data() + f.memory().size());
                }
                for (const auto& [key, value] : f.metadata()) {
                    if (value.is_string()) CHECK(value.as_string()->size() < f.file_size());
                }
            } catch (const smol::Error& e) {
                ++rejected;
                if (std::string(e.what()).rfind("corrupt.gguf: ", 0) != 0) FAIL("message does not name the file: ", e.what());
            }
        }
    }
    MESSAGE("corruption sweep over ", header_bytes, " header bytes: ", parsed, " parsed, ", rejected, " rejected");
    CHECK(rejected > 0);
}

TEST_CASE("gguf reference fixtures") {
    const std::filesystem::path data = SMOL_TEST_DATA_DIR;
    struct Fixture {
        const char* path;
        std::size_t tensors;
        std::int64_t vocab;
        std::int64_t blocks;
    };
    for (const Fixture& fx : {Fixture{"tiny/smollm3-tiny-Q4_K_M.gguf", 74, 4096, 8},
                              Fixture{"tiny-f32/smollm3-tiny-f32.gguf", 74, 4096, 8},
                              Fixture{"vocab/smollm3-vocab.gguf", 0, 128256, 36}}) {
        CAPTURE(fx.path);
        const File f = File::open(data / fx.path);
        CHECK(f.tensors().size() == fx.tensors);
        CHECK(f.get_string("general.architecture") == "smollm3");
        CHECK(f.require("tokenizer.ggml.tokens").strings().size() == std::size_t(fx.vocab));
        CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
        if (f.find("smollm3.block_count")) CHECK(f.get_int("smollm3.block_count") == fx.blocks);
        std::uint64_t end = 0;  // a file without tensors may end before the aligned data offset
        for (const auto& t : f.tensors()) {
            CHECK(reinterpret_cast<std::uintptr_t>(t.data) % f.alignment() == 0);
            end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
        }
        CHECK(end <= f.file_size());
        // Touch every metadata value once (any mistake in the pointers shows under ASan).
        for (const auto& [key, value] : f.metadata()) {
            if (value.is_array() && value.element_type() == ValueType::String) {
                std::size_t total = 0;
                for (auto s : value.strings()) total += s.size();
                CHECK(total < f.file_size());
            }
        }
    }

    const File tiny = File::open(data / "tiny/smollm3-tiny-Q4_K_M.gguf");
    const auto& embd = tiny.tensor("token_embd.weight");
    CHECK(embd.type == TensorType::Q6_K);
    CHECK(embd.shape == std::vector<std::int64_t>{512, 4096});
    CHECK(embd.n_bytes == 4096ull * 2 * 210);
    CHECK(tiny.tensor("blk.0.attn_norm.weight").type == TensorType::F32);
    CHECK(tiny.tensor("blk.1.attn_v.weight").type == TensorType::Q4_K);
    CHECK(tiny.tensor("blk.0.attn_v.weight").type == TensorType::Q6_K);

    const File f32 = File::open(data / "tiny-f32/smollm3-tiny-f32.gguf");
    CHECK(f32.tensor("token_embd.weight").type == TensorType::F32);
    CHECK(f32.tensor("token_embd.weight").shape == std::vector<std::int64_t>{256, 4096});

    const File vocab = File::open(data / "vocab/smollm3-vocab.gguf");
    CHECK(vocab.get_int("tokenizer.ggml.bos_token_id") == 128000);
    CHECK(vocab.get_int("tokenizer.ggml.eos_token_id") == 128012);
    CHECK(vocab.get_string("tokenizer.ggml.pre") == "smaug-bpe");
    CHECK(vocab.require("tokenizer.ggml.merges").strings().size() == 280147);
}

// The counts and lengths a file states cannot make the reader allocate past its caps, however
// many bytes follow: each case has enough bytes that only the cap can reject it.
TEST_CASE("gguf limits: key and tensor name length, key and tensor counts, nested arrays in all") {
    using smol::gguf::kMaxNameBytes;
    SUBCASE("a metadata key over kMaxNameBytes") {
        Raw r = Raw::header(0, 1);
        const auto key_at = r.size();
        r.str(std::string(kMaxNameBytes + 1, 'k')).type(ValueType::U8).u8(1);
        expect_rejected(r.b, "long-key.gguf",
                        {"string length 65536", "metadata key", "metadata entry 0", at(key_at), "limit of 65535 bytes"});
        // Exactly the limit is a key like any other.
        r = Raw::header(0, 1);
        r.str(std::string(kMaxNameBytes, 'k')).type(ValueType::U8).u8(1);
        CHECK(File::from_bytes(r.b, "key-at-limit.gguf").get_int(std::string(kMaxNameBytes, 'k')) == 1);
    }
    SUBCASE("a tensor name over kMaxNameBytes") {
        Raw r = Raw::header(1, 0);
        r.tensor(std::string(kMaxNameBytes + 1, 't'), {8}, 0, 0).pad_to(32).zeros(32);
        expect_rejected(r.b, "long-name.gguf", {"string length 65536", "tensor name", at(24), "limit of 65535 bytes"});
    }
    SUBCASE("more keys than kMaxMetadataEntries") {
        const std::uint64_t count = smol::gguf::kMaxMetadataEntries + 1;
        Raw r = Raw::header(0, count);
        r.zeros(std::size_t(count) * 13);
        expect_rejected(r.b, "many-keys-fit.gguf", {"metadata count " + std::to_string(count), at(16), "limit of 1048576 keys"});
    }
    SUBCASE("more tensors than kMaxTensors") {
        const std::uint64_t count = smol::gguf::kMaxTensors + 1;
        Raw r = Raw::header(count, 0);
        r.zeros(std::size_t(count) * 32);
        expect_rejected(r.b, "many-tensors-fit.gguf", {"tensor count " + std::to_string(count), at(8), "limit of 1048576 tensors"});
    }
    SUBCASE("nested arrays past kMaxNestedArrays, counted over the whole file") {
        // Two nested arrays under one key, then a key claiming all but one of the budget: three
        // over it together, so the second key is refused before its arrays are allocated.
        const std::uint64_t second = smol::gguf::kMaxNestedArrays - 1;
        Raw r = Raw::header(0, 2);
        r.str("a.first").type(ValueType::Array).type(ValueType::Array).u64(2);
        for (int i = 0; i < 2; ++i) r.type(ValueType::U8).u64(0);
        r.str("a.second").type(ValueType::Array).type(ValueType::Array);
        const auto count_at = r.size();
        r.u64(second);
        for (std::uint64_t i = 0; i < second; ++i) r.type(ValueType::U8).u64(0);
        expect_rejected(r.b, "nested-budget.gguf",
                        {"'a.second'", "array of " + std::to_string(second) + " arrays", at(count_at), "limit of 1048576 nested arrays"});
    }
}

// The documented way to replace a model file under a running server (reader.hpp, FileMemory):
// write the new file beside it and rename it over the old name. The mapping keeps the old
// inode, so what was loaded keeps reading the old bytes; the next open sees the new file.
// (Truncating or rewriting the file in place instead is not safe with any mmap flags, and is
// not tested here: it would be a SIGBUS.)
TEST_CASE("gguf: a model file replaced by rename while mapped keeps its old bytes") {
    TempFile model("smol-test-gguf-rename"), replacement("smol-test-gguf-rename-new");
    const Bytes old_image = small_valid_file();
    Raw r = Raw::header(1, 1);
    r.str("general.architecture").type(ValueType::String).str("next");
    r.tensor("t", {8}, 0, 0).pad_to(32);
    const Bytes new_data = pattern(32, 10);
    r.b.insert(r.b.end(), new_data.begin(), new_data.end());
    std::ofstream(model.path, std::ios::binary).write(reinterpret_cast<const char*>(old_image.data()), std::streamsize(old_image.size()));
    std::ofstream(replacement.path, std::ios::binary).write(reinterpret_cast<const char*>(r.b.data()), std::streamsize(r.b.size()));

    const File mapped = File::open(model.path);
    const Bytes old_tensor(mapped.tensor("t").data, mapped.tensor("t").data + 32);
    std::filesystem::rename(replacement.path, model.path);

    CHECK(mapped.get_string("general.architecture") == "test");
    CHECK(Bytes(mapped.tensor("t").data, mapped.tensor("t").data + 32) == old_tensor);
    CHECK(old_tensor == pattern(32, 9));
    const File reopened = File::open(model.path);
    CHECK(reopened.get_string("general.architecture") == "next");
    CHECK(Bytes(reopened.tensor("t").data, reopened.tensor("t").data + 32) == new_data);
}

// The "THPeligible" line of the mapping holding p in /proc/self/smaps: 1 where the kernel may back
// it with transparent huge pages, 0 where not, -1 where the file or the line is missing.
int huge_page_eligible(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto address = std::uintptr_t(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        unsigned long start = 0, end = 0;
        char dash = 0;
        std::istringstream header(line);
        if (line.find(':') == std::string::npos || line.find(':') > line.find(' ')) {  // a mapping's first line
            if (header >> std::hex >> start >> dash >> end && dash == '-') inside = start <= address && address < end;
            continue;
        }
        if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
    }
    return -1;
}

TEST_CASE("buffers of 2 MiB or more start on a huge page and may be backed by one; advice stays inside its range") {
    constexpr std::size_t kBytes = std::size_t(16) << 20;
    smol::AlignedBuffer large(kBytes), small(std::size_t(1) << 20);
    CHECK(std::uintptr_t(large.data()) % smol::AlignedBuffer::kHugePage == 0);
    CHECK(std::uintptr_t(small.data()) % smol::AlignedBuffer::kAlignment == 0);
    smol::AlignedFloats floats;
    floats.resize(kBytes / sizeof(float) + 3);
    CHECK(std::uintptr_t(floats.data()) % smol::AlignedBuffer::kHugePage == 0);
    CHECK(std::all_of(floats.data(), floats.data() + floats.size(), [](float f) { return f == 0.0f; }));

    std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(enabled, modes);
    if (modes.find("[madvise]") == std::string::npos) {
        MESSAGE("transparent huge pages are not in madvise mode here ('", modes, "'): the advice changes nothing to see");
        return;
    }
    std::vector<std::uint8_t> plain(kBytes);  // allocated without advice
    const std::uint8_t* middle_of_plain = plain.data() + kBytes / 2;
    if (huge_page_eligible(middle_of_plain) < 0) {
        MESSAGE("/proc/self/smaps has no THPeligible line here: nothing to check");
        return;
    }
    CHECK(huge_page_eligible(middle_of_plain) == 0);
    CHECK(huge_page_eligible(large.data() + kBytes / 2) == 1);
    CHECK(huge_page_eligible(reinterpret_cast<const std::uint8_t*>(floats.data()) + kBytes / 2) == 1);
    smol::platform::advise_huge_pages(plain.data() + 1, std::size_t(1) << 20);  // no whole huge page: nothing
    CHECK(huge_page_eligible(middle_of_plain) == 0);
    smol::platform::advise_huge_pages(plain.data(), plain.size());
    CHECK(huge_page_eligible(middle_of_plain) == 1);
}

}  // namespace test_gguf
