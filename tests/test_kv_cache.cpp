// The KV cache: its size per token in each cache type, memory that becomes resident only as
// positions are written, copies of the filled positions, and the cache types' names (the -ctk/-ctv
// flags that take them are examples/program_args.hpp's, tested in test_program_args).

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "smol/model/kv_cache.hpp"
#include "smol/ops/attention.hpp"

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

TEST_CASE("cache types are named as llama.cpp names them, and only those names parse") {
    for (KvType t : {KvType::f16, KvType::q8_0, KvType::q4_0}) CHECK(parse_kv_type(kv_type_name(t)) == t);
    CHECK(std::string(kv_type_name(KvType::q8_0)) == "q8_0");
    CHECK_FALSE(parse_kv_type("q5_1"));
    CHECK_FALSE(parse_kv_type("F16"));
    CHECK_FALSE(parse_kv_type(""));
}
