#pragma once
// The model configurations smol is compiled for. Adding one here (and to the registry list at
// the bottom) is all it takes to support another SmolLM3-architecture size.

#include <string_view>

#include "smol/model/config.hpp"

namespace smol {

// HuggingFaceTB/SmolLM3-3B.
struct SmolLM3_3B : ModelConfig<Hyperparameters{.n_layers = 36, .d_model = 2048, .d_ffn = 11008, .n_heads = 16,
                                                .n_kv_heads = 4, .head_dim = 128, .n_vocab = 128256,
                                                .rope_theta = 5e6f, .norm_eps = 1e-6f, .max_context = 65536,
                                                .max_yarn_context = 131072},
                                EveryNthLayerIsNoPE<36, 4>> {
    static constexpr std::string_view name = "SmolLM3-3B";
};

// The quantized test model in tests/data/tiny (llama.cpp's Q4_K_M recipe on random weights).
struct SmolLM3_TinyQ4 : ModelConfig<Hyperparameters{.n_layers = 8, .d_model = 512, .d_ffn = 1024, .n_heads = 4,
                                                    .n_kv_heads = 2, .head_dim = 128, .n_vocab = 4096,
                                                    .rope_theta = 5e6f, .norm_eps = 1e-6f, .max_context = 65536,
                                                .max_yarn_context = 131072},
                                    EveryNthLayerIsNoPE<8, 4>> {
    static constexpr std::string_view name = "SmolLM3-tiny-512";
};

// The float test model in tests/data/tiny-f32.
struct SmolLM3_TinyF32 : ModelConfig<Hyperparameters{.n_layers = 8, .d_model = 256, .d_ffn = 512, .n_heads = 4,
                                                     .n_kv_heads = 2, .head_dim = 64, .n_vocab = 4096,
                                                     .rope_theta = 5e6f, .norm_eps = 1e-6f, .max_context = 65536,
                                                .max_yarn_context = 131072},
                                     EveryNthLayerIsNoPE<8, 4>> {
    static constexpr std::string_view name = "SmolLM3-tiny-256";
};

static_assert(SmolLM3_3B::uses_rope(0) && SmolLM3_3B::uses_rope(2) && !SmolLM3_3B::uses_rope(3) &&
              !SmolLM3_3B::uses_rope(35) && SmolLM3_3B::uses_rope(34));
static_assert(SmolLM3_3B::nope_layers::list.size() == 9);

}  // namespace smol
