#pragma once
// How attention sees one layer of a sequence's key/value cache, and the formats a cache row can
// take. Keys and values are each [n_kv_heads, capacity, row] with head g's rows starting
// g * head_stride bytes in; a row is one position's head_dim values in the cache type: fp16, or
// GGUF's Q8_0 / Q4_0 blocks of 32 (llama.cpp's -ctk/-ctv types). The cache that owns the memory
// (model/kv_cache.hpp) hands these views out, so ops/ need not know it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/core/tensor_types.hpp"

namespace smol {

enum class KvType : std::uint8_t { f16, q8_0, q4_0 };

inline constexpr const char* kv_type_name(KvType t) {
    switch (t) {
        case KvType::f16: return "f16";
        case KvType::q8_0: return "q8_0";
        case KvType::q4_0: return "q4_0";
    }
    return "?";
}

inline std::optional<KvType> parse_kv_type(std::string_view name) {
    for (KvType t : {KvType::f16, KvType::q8_0, KvType::q4_0})
        if (name == kv_type_name(t)) return t;
    return std::nullopt;
}

// The tensor type a cache row holds: its geometry and conversions are that type's row of the
// type table (quant/type_table.hpp).
inline constexpr TensorType kv_tensor_type(KvType t) {
    switch (t) {
        case KvType::f16: return TensorType::F16;
        case KvType::q8_0: return TensorType::Q8_0;
        case KvType::q4_0: return TensorType::Q4_0;
    }
    return TensorType::F16;
}

// Values per block: a quantized row is a whole number of blocks.
inline constexpr int kv_block_values(KvType t) { return int(traits_of(kv_tensor_type(t)).block_elements); }

// Bytes of one row of `head_dim` values.
inline constexpr std::size_t kv_row_bytes(KvType t, int head_dim) {
    const TensorTypeTraits traits = traits_of(kv_tensor_type(t));
    return std::size_t(head_dim) / traits.block_elements * traits.block_bytes;
}

// The cache types of keys and values; llama.cpp's default is f16 for both.
struct KvCacheTypes {
    KvType keys = KvType::f16;
    KvType values = KvType::f16;
    bool operator==(const KvCacheTypes&) const = default;
};

inline void check_kv_head_dim(KvType t, int head_dim) {
    if (head_dim <= 0 || head_dim % kv_block_values(t) != 0)
        fail("KV cache type ", kv_type_name(t), ": expected a head size that is a multiple of ", kv_block_values(t),
             ", found ", head_dim);
}

// The programs' cache-type flags, llama.cpp's names: one parser and one help text for all.
inline constexpr const char* kKvCacheTypeUsage =
    "  -ctk, --cache-type-k T   KV cache type for keys: f16 (default), q8_0, q4_0\n"
    "  -ctv, --cache-type-v T   KV cache type for values: f16 (default), q8_0, q4_0\n";

inline bool is_kv_cache_type_flag(std::string_view flag) {
    return flag == "-ctk" || flag == "--cache-type-k" || flag == "-ctv" || flag == "--cache-type-v";
}

// Reads one of the flags above into `types`; a bad value is an error naming the flag.
inline void apply_kv_cache_type_flag(KvCacheTypes& types, std::string_view flag, const std::string& value) {
    const std::optional<KvType> t = parse_kv_type(value);
    if (!t) fail(flag, ": expected f16, q8_0 or q4_0, found '", value, "'");
    if (flag == "-ctk" || flag == "--cache-type-k") types.keys = *t;
    else if (flag == "-ctv" || flag == "--cache-type-v") types.values = *t;
    else fail("apply_kv_cache_type_flag: ", flag, " is not a cache type flag");
}

struct KvLayer {
    std::byte* keys;                // [n_kv_heads, capacity, kv_row_bytes(key_type)]
    std::byte* values;              // [n_kv_heads, capacity, kv_row_bytes(value_type)]
    std::size_t key_head_stride;    // bytes from one head's key rows to the next head's
    std::size_t value_head_stride;  // the same for values
    KvType key_type;
    KvType value_type;
    int n_kv_heads;
    int head_dim;

    std::byte* key_row(int head, int position) const {
        return keys + std::size_t(head) * key_head_stride + std::size_t(position) * kv_row_bytes(key_type, head_dim);
    }
    std::byte* value_row(int head, int position) const {
        return values + std::size_t(head) * value_head_stride +
               std::size_t(position) * kv_row_bytes(value_type, head_dim);
    }
};

}  // namespace smol
