#pragma once
// The two tiny fixture models (tests/data/tiny: Q4_K_M, tests/data/tiny-f32: float), each loaded
// once per test program and shared by its test cases, as a server's requests share one engine.

#include <string>

#include "smol/generate/engine.hpp"

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

}  // namespace smol_test
