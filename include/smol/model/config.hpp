#pragma once
// Compile-time model configurations. A config carries every size of the network and the set
// of NoPE layers (layers that apply no rotary embedding) as template parameters, so the layer
// pipeline is built statically and each layer knows at compile time whether it rotates Q and K.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace smol {

// The sizes of a SmolLM3-architecture network (GGUF `smollm3.*` keys).
struct Hyperparameters {
    int n_layers;
    int d_model;     // embedding_length
    int d_ffn;       // feed_forward_length
    int n_heads;     // attention.head_count
    int n_kv_heads;  // attention.head_count_kv
    int head_dim;    // rope.dimension_count (RoPE covers the whole head)
    int n_vocab;
    float rope_theta;
    float norm_eps;
    int max_context;  // context_length the model was trained for
    int max_yarn_context = 0;  // the longest context YaRN may stretch it to (0: none)
};

// Layers, 0-based, that skip the rotary embedding.
template <int... Layers>
struct LayerSet {
    static constexpr bool contains(int layer) { return ((layer == Layers) || ...); }
    static constexpr std::array<int, sizeof...(Layers)> list{Layers...};
};

namespace detail {
template <int Period, class Sequence>
struct EveryNthLayer;
template <int Period, std::size_t... I>
struct EveryNthLayer<Period, std::index_sequence<I...>> {
    using type = LayerSet<int((I + 1) * Period - 1)...>;
};
}  // namespace detail

// SmolLM3's rule: layer il skips RoPE iff (il + 1) % Period == 0, i.e. layers P-1, 2P-1, ...
template <int NLayers, int Period>
using EveryNthLayerIsNoPE = typename detail::EveryNthLayer<Period, std::make_index_sequence<NLayers / Period>>::type;

template <Hyperparameters H, class NoPELayers>
struct ModelConfig {
    static constexpr Hyperparameters hp = H;
    using nope_layers = NoPELayers;
    static constexpr bool uses_rope(int layer) { return !NoPELayers::contains(layer); }

    static constexpr int n_layers = H.n_layers;
    static constexpr int d_model = H.d_model;
    static constexpr int d_ffn = H.d_ffn;
    static constexpr int n_heads = H.n_heads;
    static constexpr int n_kv_heads = H.n_kv_heads;
    static constexpr int head_dim = H.head_dim;
    static constexpr int n_vocab = H.n_vocab;
    static constexpr int d_q = n_heads * head_dim;    // query width
    static constexpr int d_kv = n_kv_heads * head_dim;  // key / value width
    static_assert(n_heads % n_kv_heads == 0, "query heads must divide evenly among KV heads");
    static_assert(head_dim % 2 == 0, "RoPE rotates pairs of dimensions");
};

// Describes the NoPE set for messages: "3, 7, 11".
template <class Config>
std::string describe_nope_layers() {
    std::string s;
    for (int il : Config::nope_layers::list) s += (s.empty() ? "" : ", ") + std::to_string(il);
    return s.empty() ? "none" : s;
}

}  // namespace smol
