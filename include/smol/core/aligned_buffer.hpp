#pragma once
// Bytes aligned for whole-vector loads: 64 bytes, a cache line and an AVX-512 register. Buffers of
// 2 MiB or more start on a 2 MiB boundary and ask for transparent huge pages before their first
// write, so that TLB misses do not pace the code that streams through them: the row groups,
// which prompts and decode read whole, and a batch's activations, into which a GEMM item writes
// one 64-byte line per token, each in another row kilobytes from the last (docs/performance.md).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "smol/core/platform.hpp"

namespace smol {

namespace aligned_buffer_detail {
inline constexpr std::size_t kVectorAlignment = 64;
// Frees with the alignment the buffer was allocated with.
struct Delete {
    std::size_t alignment = kVectorAlignment;
    void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{alignment}); }
};
}  // namespace aligned_buffer_detail

class AlignedBuffer {
    using Delete = aligned_buffer_detail::Delete;

public:
    static constexpr std::size_t kAlignment = aligned_buffer_detail::kVectorAlignment;
    static constexpr std::size_t kHugePage = std::size_t(2) << 20;

    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes) { reset(bytes); }

    // A fresh buffer of `bytes` bytes (contents unspecified); the old one is freed.
    void reset(std::size_t bytes) {
        data_.reset();
        const std::size_t alignment = bytes >= kHugePage ? kHugePage : kAlignment;
        auto* p = bytes ? static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{alignment})) : nullptr;
        data_ = std::unique_ptr<std::uint8_t[], Delete>(p, Delete{alignment});
        if (alignment == kHugePage) platform::advise_huge_pages(p, bytes);
        size_ = bytes;
    }
    // At least `bytes` bytes, growing by half again or to `bytes`; contents are not kept on growth.
    std::uint8_t* at_least(std::size_t bytes) {
        if (bytes > size_) reset(bytes > size_ + size_ / 2 ? bytes : size_ + size_ / 2);
        return data_.get();
    }

    std::uint8_t* data() { return data_.get(); }
    const std::uint8_t* data() const { return data_.get(); }
    std::size_t size() const { return size_; }

private:
    std::unique_ptr<std::uint8_t[], Delete> data_;
    std::size_t size_ = 0;
};

// n floats, zeroed, in an AlignedBuffer (so a batch's activations get its huge pages).
class AlignedFloats {
public:
    void resize(std::size_t n) {
        buffer_.reset(n * sizeof(float));
        if (n) std::memset(buffer_.data(), 0, n * sizeof(float));
    }
    float* data() { return reinterpret_cast<float*>(buffer_.data()); }
    const float* data() const { return reinterpret_cast<const float*>(buffer_.data()); }
    std::size_t size() const { return buffer_.size() / sizeof(float); }

private:
    AlignedBuffer buffer_;
};

}  // namespace smol
