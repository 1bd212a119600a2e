#pragma once
// The two tiny fixture models (tests/data/tiny: Q4_K_M, tests/data/tiny-f32: float), each loaded
// once per test program and shared by its test cases, as a server's requests share one engine;
// and their tokenizer (both files hold the same vocabulary) without the weights.

#include <string>

#include "smol/generate/engine.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol_test {

inline const std::string kTinyQuantizedModel = std::string(SMOL_TEST_DATA_DIR) + "/tiny/smollm3-tiny-Q4_K_M.gguf";
inline const std::string kTinyFloatModel = std::string(SMOL_TEST_DATA_DIR) + "/tiny-f32/smollm3-tiny-f32.gguf";

inline smol::Engine& quantized_engine() {
    static smol::Engine engine(kTinyQuantizedModel);
    return engine;
}

inline smol::Engine& float_engine() {
    static smol::Engine engine(kTinyFloatModel);
    return engine;
}

inline const smol::text::Tokenizer& tiny_tokenizer() {
    static const smol::gguf::File file = smol::gguf::File::open(kTinyFloatModel);
    static const smol::text::Tokenizer tokenizer = smol::text::Tokenizer::from_gguf(file);
    return tokenizer;
}

}  // namespace smol_test
