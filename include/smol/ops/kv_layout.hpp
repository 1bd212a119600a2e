#pragma once
// How attention sees one layer of a sequence's key/value cache: fp16 keys and values, each
// [n_kv_heads, capacity, head_dim] with head g's rows starting g * head_stride elements in.
// The cache that owns the memory (model/kv_cache.hpp) hands these out, so ops/ need not know it.

#include <cstddef>
#include <cstdint>

namespace smol {

struct KvLayer {
    std::uint16_t* keys;      // [n_kv_heads, capacity, head_dim] fp16
    std::uint16_t* values;    // [n_kv_heads, capacity, head_dim] fp16
    std::size_t head_stride;  // elements from one head's rows to the next head's: capacity * head_dim
    int n_kv_heads;
    int head_dim;
};

}  // namespace smol
