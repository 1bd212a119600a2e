#pragma once
// The key/value cache of one sequence: for every layer, the keys and values of every position
// processed so far, stored as fp16 (half the memory traffic of f32 at long contexts).

#include <cstdint>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/ops/kv_layout.hpp"

namespace smol {

inline constexpr int kDefaultContext = 4096;

class KvCache {
public:
    KvCache(int n_layers, int n_kv_heads, int head_dim, int capacity)
        : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), capacity_(capacity) {
        if (capacity <= 0) fail("KV cache: expected a positive context size, found ", capacity);
        const std::size_t per_layer = std::size_t(n_kv_heads) * std::size_t(capacity) * std::size_t(head_dim);
        keys_.resize(per_layer * std::size_t(n_layers));
        values_.resize(per_layer * std::size_t(n_layers));
    }
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;
    KvCache(KvCache&&) = default;
    KvCache& operator=(KvCache&&) = default;

    // An explicit copy (a cache can be hundreds of megabytes).
    KvCache copy() const {
        KvCache c(n_layers_, n_kv_heads_, head_dim_, capacity_);
        c.keys_ = keys_;
        c.values_ = values_;
        c.size_ = size_;
        return c;
    }

    int capacity() const { return capacity_; }
    int size() const { return size_; }  // positions filled
    int n_layers() const { return n_layers_; }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    std::size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(std::uint16_t); }

    // Forgets every position from `n` on, so a conversation can continue from a shared prefix.
    void truncate(int n) {
        if (n < 0 || n > size_) fail("KV cache: cannot truncate to ", n, " positions, it holds ", size_);
        size_ = n;
    }
    void clear() { size_ = 0; }

    // Checks that `n` more positions fit, with a message a user can act on.
    void reserve_positions(int first, int n) const {
        if (first != size_) fail("KV cache: expected the next position to be ", size_, ", found ", first);
        if (n > capacity_ - size_)
            fail("context full: ", size_, " tokens are cached and ", n, " more do not fit in the context of ",
                 capacity_, " tokens (raise it with -c / --ctx-size, up to the model's limit)");
    }
    void commit_positions(int n) { size_ += n; }

    // [n_kv_heads, capacity, head_dim] for one layer
    std::uint16_t* keys(int layer) { return keys_.data() + layer_offset(layer); }
    std::uint16_t* values(int layer) { return values_.data() + layer_offset(layer); }
    const std::uint16_t* keys(int layer) const { return keys_.data() + layer_offset(layer); }
    const std::uint16_t* values(int layer) const { return values_.data() + layer_offset(layer); }
    std::size_t head_stride() const { return std::size_t(capacity_) * std::size_t(head_dim_); }
    // One layer as attention reads and writes it.
    KvLayer layer(int layer) {
        return KvLayer{keys(layer), values(layer), head_stride(), n_kv_heads_, head_dim_};
    }

private:
    std::size_t layer_offset(int layer) const {
        return std::size_t(layer) * std::size_t(n_kv_heads_) * head_stride();
    }

    int n_layers_, n_kv_heads_, head_dim_, capacity_;
    int size_ = 0;
    std::vector<std::uint16_t> keys_;    // [n_layers, n_kv_heads, capacity, head_dim] fp16
    std::vector<std::uint16_t> values_;  // [n_layers, n_kv_heads, capacity, head_dim] fp16
};

}  // namespace smol
