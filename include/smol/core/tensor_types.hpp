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
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
};

struct TensorTypeTraits {
    TensorType type;
    std::string_view name;
    std::size_t block_elements;  // weights per block
    std::size_t block_bytes;     // bytes per block
};  // what smol computes with each: quant/type_table.hpp

// The geometry of every type a GGUF may legally hold, ggml's whole type enum (ggml.h, ggml 0.25:
// ids 4, 5 and 31-33, 36-38 were removed from ggml and no file may hold them); nullopt for ids
// ggml does not define. smol reads every one of them; which it computes with is
// quant/type_table.hpp's business.
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
        case 16: return TensorTypeTraits{TensorType::IQ2_XXS, "IQ2_XXS", 256, 66};
        case 17: return TensorTypeTraits{TensorType::IQ2_XS, "IQ2_XS", 256, 74};
        case 18: return TensorTypeTraits{TensorType::IQ3_XXS, "IQ3_XXS", 256, 98};
        case 19: return TensorTypeTraits{TensorType::IQ1_S, "IQ1_S", 256, 50};
        case 20: return TensorTypeTraits{TensorType::IQ4_NL, "IQ4_NL", 32, 18};
        case 21: return TensorTypeTraits{TensorType::IQ3_S, "IQ3_S", 256, 110};
        case 22: return TensorTypeTraits{TensorType::IQ2_S, "IQ2_S", 256, 82};
        case 23: return TensorTypeTraits{TensorType::IQ4_XS, "IQ4_XS", 256, 136};
        case 24: return TensorTypeTraits{TensorType::I8, "I8", 1, 1};
        case 25: return TensorTypeTraits{TensorType::I16, "I16", 1, 2};
        case 26: return TensorTypeTraits{TensorType::I32, "I32", 1, 4};
        case 27: return TensorTypeTraits{TensorType::I64, "I64", 1, 8};
        case 28: return TensorTypeTraits{TensorType::F64, "F64", 1, 8};
        case 29: return TensorTypeTraits{TensorType::IQ1_M, "IQ1_M", 256, 56};
        case 30: return TensorTypeTraits{TensorType::BF16, "BF16", 1, 2};
        case 34: return TensorTypeTraits{TensorType::TQ1_0, "TQ1_0", 256, 54};
        case 35: return TensorTypeTraits{TensorType::TQ2_0, "TQ2_0", 256, 66};
        case 39: return TensorTypeTraits{TensorType::MXFP4, "MXFP4", 32, 17};
        case 40: return TensorTypeTraits{TensorType::NVFP4, "NVFP4", 64, 36};
        case 41: return TensorTypeTraits{TensorType::Q1_0, "Q1_0", 128, 18};
        case 42: return TensorTypeTraits{TensorType::Q2_0, "Q2_0", 64, 18};
        default: return std::nullopt;
    }
}

constexpr TensorTypeTraits traits_of(TensorType type) { return *tensor_type_traits(std::uint32_t(type)); }
constexpr std::string_view type_name(TensorType type) { return traits_of(type).name; }

}  // namespace smol
