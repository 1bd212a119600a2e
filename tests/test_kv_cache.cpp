// The KV cache: its size per token in each cache type, memory that becomes resident only as
// positions are written, copies of the filled positions, the cache types' names (the -ctk/-ctv
// flags that take them are examples/program_args.hpp's, tested in test_program_args), and cache
// files (generate/cache_file.hpp): read back bit for bit, hostile ones refused.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "smol/generate/cache_file.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/ops/attention.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_kv_cache {

using namespace smol;

TEST_CASE("bytes per token follow the cache types, as llama.cpp sizes them") {
    // SmolLM3-3B: 36 layers x 4 KV heads x 128 values, keys and values.
    const auto per_token = [](KvCacheTypes t) { return KvCache(36, 4, 128, 16, t).bytes_per_token(); };
    CHECK(per_token({}) == 73728);                                  // 72 KiB: 4.5 GiB at 65536 tokens
    CHECK(per_token({KvType::q8_0, KvType::q8_0}) == 39168);        // 34 bytes per 32 values
    CHECK(per_token({KvType::q4_0, KvType::q4_0}) == 20736);        // 18 bytes per 32 values
    CHECK(per_token({KvType::q8_0, KvType::f16}) == 39168 / 2 + 73728 / 2);
    CHECK(KvCache(36, 4, 128, 65536, {KvType::q4_0, KvType::q4_0}).bytes() == 20736ull * 65536);
    CHECK_THROWS_WITH_AS(KvCache(2, 2, 48, 16, {KvType::q4_0, KvType::f16}),
                         doctest::Contains("q4_0: expected a head size that is a multiple of 32, found 48"), Error);
}

TEST_CASE("a large cache costs memory only for the positions written, and copies only those") {
    // The cache's own pages are counted (mincore over its mappings), not the process's resident
    // memory, which also holds the inputs below and, under a sanitizer, its shadow and quarantine.
    // 8 layers x 8 heads x 128 x 65536 positions of f16 keys and values: 2 GiB reserved.
    const int n_layers = 8, n_kv = 8, head_dim = 128, capacity = 65536;
    KvCache cache(n_layers, n_kv, head_dim, capacity);
    CHECK(cache.bytes() == std::size_t(2) << 30);
    CHECK(cache.resident_bytes() == 0);  // nothing touched yet

    // Write 1024 positions in every layer: 1024 x 32 KiB = 32 MiB of rows, in 128 regions (keys
    // and values of each layer's heads) of 256 KiB each, every region starting on a page. At most
    // one partly written page per region, were the rows not a whole number of pages.
    const int written = 1024;
    std::vector<float> k(std::size_t(written) * n_kv * head_dim, 0.5f), v(k.size(), -0.25f);
    for (int l = 0; l < n_layers; ++l) kv_store(cache.layer(l), 0, k.data(), v.data(), written);
    cache.commit_positions(written);
    const std::size_t rows = cache.bytes_per_token() * written;
    const std::size_t partial_pages = std::size_t(2 * n_layers * n_kv) * std::size_t(::sysconf(_SC_PAGESIZE));
    CHECK(cache.resident_bytes() >= rows);
    CHECK(cache.resident_bytes() <= rows + partial_pages);

    KvCache twin = cache.copy();
    CHECK(twin.size() == written);
    CHECK(twin.resident_bytes() >= rows);
    CHECK(twin.resident_bytes() <= rows + partial_pages);
    const KvLayer a = cache.layer(n_layers - 1), b = twin.layer(n_layers - 1);
    CHECK(std::memcmp(a.key_row(n_kv - 1, 0), b.key_row(n_kv - 1, 0), written * head_dim * 2) == 0);
    CHECK(std::memcmp(a.value_row(3, 0), b.value_row(3, 0), written * head_dim * 2) == 0);
}

TEST_CASE("a prefix copied from another cache replaces what the cache held, and only a like cache lends one") {
    const int n_layers = 2, n_kv = 2, head_dim = 32, capacity = 16;
    KvCache source(n_layers, n_kv, head_dim, capacity), target(n_layers, n_kv, head_dim, capacity);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> k(std::size_t(10) * n_kv * head_dim), v(k.size());
    for (float& x : k) x = value(rng);
    for (float& x : v) x = value(rng);
    for (int l = 0; l < n_layers; ++l) kv_store(source.layer(l), 0, k.data(), v.data(), 10);
    source.commit_positions(10);
    std::vector<float> other(std::size_t(12) * n_kv * head_dim, 0.75f);
    for (int l = 0; l < n_layers; ++l) kv_store(target.layer(l), 0, other.data(), other.data(), 12);
    target.commit_positions(12);

    target.assign_prefix(source, 6);
    CHECK(target.size() == 6);
    for (int l = 0; l < n_layers; ++l)
        for (int h = 0; h < n_kv; ++h) {
            const KvLayer a = source.layer(l), b = target.layer(l);
            CHECK(std::memcmp(a.key_row(h, 0), b.key_row(h, 0), 6 * head_dim * 2) == 0);
            CHECK(std::memcmp(a.value_row(h, 0), b.value_row(h, 0), 6 * head_dim * 2) == 0);
        }
    CHECK_THROWS_WITH_AS(target.assign_prefix(source, 11), doctest::Contains("cannot copy 11 positions, the source holds 10"),
                         Error);
    KvCache quantized(n_layers, n_kv, head_dim, capacity, {KvType::q8_0, KvType::q8_0});
    CHECK_THROWS_WITH_AS(quantized.assign_prefix(source, 2), doctest::Contains("one shape and type"), Error);
    KvCache wider(n_layers, n_kv * 2, head_dim, capacity);
    CHECK_THROWS_WITH_AS(wider.assign_prefix(source, 2), doctest::Contains("one shape and type"), Error);
}

TEST_CASE("cache types are named as llama.cpp names them, and only those names parse") {
    for (KvType t : {KvType::f16, KvType::q8_0, KvType::q4_0}) CHECK(parse_kv_type(kv_type_name(t)) == t);
    CHECK(std::string(kv_type_name(KvType::q8_0)) == "q8_0");
    CHECK_FALSE(parse_kv_type("q5_1"));
    CHECK_FALSE(parse_kv_type("F16"));
    CHECK_FALSE(parse_kv_type(""));
}

namespace {

// A cache of `n` positions of random bytes in every head's keys and values.
KvCache random_cache(int n, KvCacheTypes types = {}, int capacity = 64) {
    KvCache cache(2, 2, 64, capacity, types);
    std::mt19937 rng(7);
    for (std::size_t head = 0; head < cache.heads(); ++head)
        for (const std::span<std::byte> rows : {cache.filled_keys(head, n), cache.filled_values(head, n)})
            for (std::byte& b : rows) b = std::byte(rng());
    cache.set_size(n);
    return cache;
}

std::string file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The CacheFileError reading `path` into a fresh cache gives; fails when it reads.
std::string refusal_reading(const std::filesystem::path& path, KvCacheTypes types = {}, int capacity = 64) {
    KvCache into(2, 2, 64, capacity, types);
    try {
        read_cache_file(path, into, "model A", 1000);
    } catch (const CacheFileError& e) {
        CHECK(into.size() == 0);
        return e.what();
    }
    FAIL("read " << path);
    return {};
}

}  // namespace

TEST_CASE("a cache file gives back the tokens, keys and values bit for bit, in every cache type") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("smol-cache-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const KvCacheTypes types : {KvCacheTypes{}, KvCacheTypes{KvType::q8_0, KvType::q4_0}}) {
        CAPTURE(kv_type_name(types.keys));
        const KvCache cache = random_cache(20, types);
        std::vector<std::int32_t> tokens(17);
        for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t(i * 37 % 1000);
        const std::uint64_t written = write_cache_file(dir / "a.bin", cache, tokens, "model A", "key 0");
        CHECK(written == std::filesystem::file_size(dir / "a.bin"));
        for (const auto& entry : std::filesystem::directory_iterator(dir))  // no temporary file left
            CHECK(entry.path().filename().string().find(".partial") == std::string::npos);

        KvCache into(2, 2, 64, 64, types);
        const RestoredCache restored = read_cache_file(dir / "a.bin", into, "model A", 1000);
        CHECK(restored.tokens == tokens);
        CHECK(restored.partition == "key 0");
        CHECK(restored.bytes_read == written);
        REQUIRE(into.size() == 17);
        for (std::size_t head = 0; head < cache.heads(); ++head) {
            CHECK(std::memcmp(into.filled_keys(head, 17).data(), cache.filled_keys(head, 17).data(),
                              cache.filled_keys(head, 17).size()) == 0);
            CHECK(std::memcmp(into.filled_values(head, 17).data(), cache.filled_values(head, 17).data(),
                              cache.filled_values(head, 17).size()) == 0);
        }
        // Written again, the same bytes.
        write_cache_file(dir / "b.bin", into, restored.tokens, "model A", "key 0");
        CHECK(file_bytes(dir / "a.bin") == file_bytes(dir / "b.bin"));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a cache file of another model, type or shape, or a hostile one, is refused saying what was expected") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("smol-cache-hostile-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5};
    write_cache_file(dir / "good.bin", random_cache(5), tokens, "model A", "");
    const std::string good = file_bytes(dir / "good.bin");

    {
        KvCache into(2, 2, 64, 64);
        CHECK_THROWS_WITH_AS(read_cache_file(dir / "good.bin", into, "model B", 1000),
                             doctest::Contains("another model: expected model B, found model A"), CacheFileError);
    }
    CHECK(refusal_reading(dir / "good.bin", {KvType::q8_0, KvType::q8_0}).find("expected q8_0/q8_0") != std::string::npos);
    {
        KvCache other_shape(3, 2, 64, 64);
        CHECK_THROWS_WITH_AS(read_cache_file(dir / "good.bin", other_shape, "model A", 1000),
                             doctest::Contains("expected 3 x 2 x 64"), CacheFileError);
    }
    CHECK(refusal_reading(dir / "good.bin", {}, 4).find("at most 4") != std::string::npos);
    {
        KvCache into(2, 2, 64, 64);
        CHECK_THROWS_WITH_AS(read_cache_file(dir / "good.bin", into, "model A", 5), doctest::Contains("vocabulary [0, 5)"),
                             CacheFileError);
    }
    // Every cut short, a byte more, and each header field made hostile: refused, never read past.
    for (std::size_t cut = 0; cut < good.size(); cut += (cut < 96 ? 1 : 97)) {
        CAPTURE(cut);
        put_bytes(dir / "bad.bin", good.substr(0, cut));
        CHECK_FALSE(refusal_reading(dir / "bad.bin").empty());
    }
    put_bytes(dir / "bad.bin", good + "x");
    CHECK(refusal_reading(dir / "bad.bin").find("its header says") != std::string::npos);
    const auto patched = [&](std::size_t at, std::uint32_t value) {
        std::string bytes = good;
        for (int i = 0; i < 4; ++i) bytes[at + std::size_t(i)] = char((value >> (8 * i)) & 0xFF);
        put_bytes(dir / "bad.bin", bytes);
        return refusal_reading(dir / "bad.bin");
    };
    CHECK(patched(0, 0x41414141).find("not a smol KV cache file") != std::string::npos);
    CHECK(patched(8, 2).find("version 2; expected 1") != std::string::npos);
    CHECK(patched(12, 0xFFFFFFFF).find("expected at most 4096") != std::string::npos);  // the model identity's length
    const std::size_t count_at = 8 + 4 + 4 + 7 + 4 + 2 + 12;  // magic, version, "model A", partition "", types, shape
    CHECK(patched(count_at, 0xFFFFFFFF).find("at most 64") != std::string::npos);
    CHECK(patched(count_at, 6).find("its header says") != std::string::npos);
    CHECK(patched(count_at + 4, 0xFFFFFFFF).find("outside the vocabulary") != std::string::npos);
    std::string types = good;
    types[count_at - 14] = char(9);
    put_bytes(dir / "bad.bin", types);
    CHECK(refusal_reading(dir / "bad.bin").find("unknown/f16") != std::string::npos);
    std::filesystem::remove_all(dir);
}

}  // namespace test_kv_cache
