#pragma once
// ggml tensor type ids and their block geometry: the ids GGUF files store, shared by the reader
// (tensor sizes) and the quantized kernels (block formats).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace smol {

enum class TensorType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
};

struct TensorTypeTraits {
    TensorType type;
    std::string_view name;
    std::size_t block_elements;  // weights per block
    std::size_t block_bytes;     // bytes per block
};  // what smol computes with each: quant/type_table.hpp

// The geometry of every type a GGUF may legally hold; nullopt for ids ggml does not define.
constexpr std::optional<TensorTypeTraits> tensor_type_traits(std::uint32_t id) {
    switch (id) {
        case 0: return TensorTypeTraits{TensorType::F32, "F32", 1, 4};
        case 1: return TensorTypeTraits{TensorType::F16, "F16", 1, 2};
        case 2: return TensorTypeTraits{TensorType::Q4_0, "Q4_0", 32, 18};
        case 3: return TensorTypeTraits{TensorType::Q4_1, "Q4_1", 32, 20};
        case 6: return TensorTypeTraits{TensorType::Q5_0, "Q5_0", 32, 22};
        case 7: return TensorTypeTraits{TensorType::Q5_1, "Q5_1", 32, 24};
        case 8: return TensorTypeTraits{TensorType::Q8_0, "Q8_0", 32, 34};
        case 9: return TensorTypeTraits{TensorType::Q8_1, "Q8_1", 32, 36};
        case 10: return TensorTypeTraits{TensorType::Q2_K, "Q2_K", 256, 84};
        case 11: return TensorTypeTraits{TensorType::Q3_K, "Q3_K", 256, 110};
        case 12: return TensorTypeTraits{TensorType::Q4_K, "Q4_K", 256, 144};
        case 13: return TensorTypeTraits{TensorType::Q5_K, "Q5_K", 256, 176};
        case 14: return TensorTypeTraits{TensorType::Q6_K, "Q6_K", 256, 210};
        case 15: return TensorTypeTraits{TensorType::Q8_K, "Q8_K", 256, 292};
        case 24: return TensorTypeTraits{TensorType::I8, "I8", 1, 1};
        case 25: return TensorTypeTraits{TensorType::I16, "I16", 1, 2};
        case 26: return TensorTypeTraits{TensorType::I32, "I32", 1, 4};
        case 27: return TensorTypeTraits{TensorType::I64, "I64", 1, 8};
        case 28: return TensorTypeTraits{TensorType::F64, "F64", 1, 8};
        case 30: return TensorTypeTraits{TensorType::BF16, "BF16", 1, 2};
        default: return std::nullopt;
    }
}

constexpr TensorTypeTraits traits_of(TensorType type) { return *tensor_type_traits(std::uint32_t(type)); }
constexpr std::string_view type_name(TensorType type) { return traits_of(type).name; }

}  // namespace smol
