#pragma once
// Bytes aligned for whole-vector loads: 64 bytes, a cache line and an AVX-512 register.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace smol {

class AlignedBuffer {
public:
    static constexpr std::size_t kAlignment = 64;

    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes) { reset(bytes); }

    // A fresh buffer of `bytes` bytes (contents unspecified); the old one is freed.
    void reset(std::size_t bytes) {
        data_.reset(bytes ? static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{kAlignment})) : nullptr);
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
    struct Delete {
        void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
    };
    std::unique_ptr<std::uint8_t[], Delete> data_;
    std::size_t size_ = 0;
};

}  // namespace smol
