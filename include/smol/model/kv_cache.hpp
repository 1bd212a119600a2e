#pragma once
// The key/value cache of one sequence: for every layer, the keys and values of every position
// processed so far, each row in its cache type (fp16 by default; Q8_0 or Q4_0 blocks to fit
// long contexts, as llama.cpp's -ctk/-ctv).
//
// The memory is reserved for the whole context but not touched: an anonymous mapping whose
// pages become resident only when positions are written, so a 64K-token context costs what
// the conversation has used so far, not what it might use.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/platform.hpp"
#include "smol/ops/kv_layout.hpp"

namespace smol {

inline constexpr int kDefaultContext = 4096;

// Zero-filled memory that stays untouched (not resident) until written.
class LazyBytes {
public:
    LazyBytes() = default;
    explicit LazyBytes(std::size_t n) : size_(n) {
        if (n == 0) return;
        // Each layer's heads are regions a context apart, written from their start: the mapping
        // asks for no transparent huge pages, which would make 2 MiB resident at each region's
        // first write (576 MiB for SmolLM3-3B's 288 regions), however short the conversation.
        void* p = platform::reserve_lazy_zeroed(n);
        if (!p) fail("KV cache: cannot reserve ", n, " bytes: ", std::strerror(errno));
        data_ = static_cast<std::byte*>(p);
    }
    LazyBytes(LazyBytes&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    LazyBytes& operator=(LazyBytes&& o) noexcept {
        if (this != &o) {
            release();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    LazyBytes(const LazyBytes&) = delete;
    LazyBytes& operator=(const LazyBytes&) = delete;
    ~LazyBytes() { release(); }

    std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }

    // Bytes of the mapping that are resident now (whole pages, from mincore): what writing has
    // cost, whatever else the process holds.
    std::size_t resident_bytes() const {
        if (!data_) return 0;
        std::size_t bytes = 0;
        if (!platform::resident_bytes(data_, size_, bytes))
            fail("KV cache: cannot read which pages of ", size_, " bytes are resident: ", std::strerror(errno));
        return bytes;
    }

private:
    void release() {
        if (data_) platform::unmap(data_, size_);
        data_ = nullptr;
    }
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

class KvCache {
public:
    KvCache(int n_layers, int n_kv_heads, int head_dim, int capacity, KvCacheTypes types = {})
        : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), capacity_(capacity), types_(types) {
        if (capacity <= 0) fail("KV cache: expected a positive context size, found ", capacity);
        check_kv_head_dim(types.keys, head_dim);
        check_kv_head_dim(types.values, head_dim);
        keys_ = LazyBytes(rows() * kv_row_bytes(types.keys, head_dim));
        values_ = LazyBytes(rows() * kv_row_bytes(types.values, head_dim));
    }
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;
    KvCache(KvCache&&) = default;
    KvCache& operator=(KvCache&&) = default;

    // An explicit copy (a cache can be gigabytes); only the filled positions are copied, so the
    // copy's resident memory is what the original has used.
    KvCache copy() const {
        KvCache c(n_layers_, n_kv_heads_, head_dim_, capacity_, types_);
        c.assign_prefix(*this, size_);
        return c;
    }

    // Makes this cache hold the first `n` positions of `other` (a prefix another sequence
    // computed) in place of what it held. Both caches must have the same shape and types.
    void assign_prefix(const KvCache& other, int n) {
        if (other.n_layers_ != n_layers_ || other.n_kv_heads_ != n_kv_heads_ || other.head_dim_ != head_dim_ ||
            !(other.types_ == types_))
            fail("KV cache: a prefix is copied only between caches of one shape and type; expected ", n_layers_,
                 " layers x ", n_kv_heads_, " heads x ", head_dim_, " values of ", kv_type_name(types_.keys), "/",
                 kv_type_name(types_.values), ", found ", other.n_layers_, " x ", other.n_kv_heads_, " x ",
                 other.head_dim_, " of ", kv_type_name(other.types_.keys), "/", kv_type_name(other.types_.values));
        if (n < 0 || n > other.size_ || n > capacity_)
            fail("KV cache: cannot copy ", n, " positions, the source holds ", other.size_, " and this one fits ",
                 capacity_);
        for (std::size_t head = 0; head < heads(); ++head) {
            const std::span<std::byte> keys = other.filled_keys(head, n), values = other.filled_values(head, n);
            std::memcpy(filled_keys(head, n).data(), keys.data(), keys.size());
            std::memcpy(filled_values(head, n).data(), values.data(), values.size());
        }
        size_ = n;
    }

    // Every layer's heads, layer by layer: the regions filled_keys and filled_values take.
    std::size_t heads() const { return std::size_t(n_layers_) * std::size_t(n_kv_heads_); }
    // The first `n` positions' key rows of one head (`head` counts over all layers' heads), in
    // the key type: what copy() and a cache file (generate/cache_file.hpp) move. The span may
    // reach past size(): a reader fills it, then marks the positions held (set_size).
    std::span<std::byte> filled_keys(std::size_t head, int n) const {
        return region(keys_, kv_row_bytes(types_.keys, head_dim_), head, n);
    }
    std::span<std::byte> filled_values(std::size_t head, int n) const {
        return region(values_, kv_row_bytes(types_.values, head_dim_), head, n);
    }
    // After a reader wrote the first `n` positions of every head: the cache holds them.
    void set_size(int n) {
        if (n < 0 || n > capacity_) fail("KV cache: cannot hold ", n, " positions, expected 0 to ", capacity_);
        size_ = n;
    }

    int capacity() const { return capacity_; }
    int size() const { return size_; }  // positions filled
    int n_layers() const { return n_layers_; }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    const KvCacheTypes& types() const { return types_; }
    // Keys and values of one position over all layers and heads, in the cache types.
    std::size_t bytes_per_token() const {
        return std::size_t(n_layers_) * std::size_t(n_kv_heads_) *
               (kv_row_bytes(types_.keys, head_dim_) + kv_row_bytes(types_.values, head_dim_));
    }
    // The whole context's worth: what a full cache occupies.
    std::size_t bytes() const { return bytes_per_token() * std::size_t(capacity_); }
    // What the cache occupies now: the pages its writes have made resident.
    std::size_t resident_bytes() const { return keys_.resident_bytes() + values_.resident_bytes(); }

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

    // One layer as attention reads and writes it.
    KvLayer layer(int layer) const {
        const std::size_t key_head = std::size_t(capacity_) * kv_row_bytes(types_.keys, head_dim_);
        const std::size_t value_head = std::size_t(capacity_) * kv_row_bytes(types_.values, head_dim_);
        const std::size_t heads_before = std::size_t(layer) * std::size_t(n_kv_heads_);
        return KvLayer{keys_.data() + heads_before * key_head, values_.data() + heads_before * value_head, key_head,
                       value_head, types_.keys, types_.values, n_kv_heads_, head_dim_};
    }

private:
    std::span<std::byte> region(const LazyBytes& bytes, std::size_t row_bytes, std::size_t head, int n) const {
        if (head >= heads() || n < 0 || n > capacity_)
            fail("KV cache: expected a head below ", heads(), " and 0 to ", capacity_, " positions, found head ", head,
                 " and ", n, " positions");
        return {bytes.data() + head * std::size_t(capacity_) * row_bytes, std::size_t(n) * row_bytes};
    }
    std::size_t rows() const { return std::size_t(n_layers_) * std::size_t(n_kv_heads_) * std::size_t(capacity_); }

    int n_layers_, n_kv_heads_, head_dim_, capacity_;
    KvCacheTypes types_;
    int size_ = 0;
    LazyBytes keys_;    // [n_layers, n_kv_heads, capacity, key row]
    LazyBytes values_;  // [n_layers, n_kv_heads, capacity, value row]
};

}  // namespace smol
