#pragma once
// Reading the reference data in tests/data (its README says how each file was made): prompt
// lists, raw float32 logits, and the row error the logit comparisons use.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace smol_test {

// A file under tests/data.
inline std::string test_data_path(const std::string& relative) { return std::string(SMOL_TEST_DATA_DIR) + "/" + relative; }

// prompts.txt: one prompt a line, token ids separated by commas.
inline std::vector<std::vector<std::int32_t>> read_prompts(const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in, "cannot open ", path);
    std::vector<std::vector<std::int32_t>> prompts;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::vector<std::int32_t> ids;
        std::stringstream ss(line);
        std::string item;
        while (std::getline(ss, item, ',')) ids.push_back(std::stoi(item));
        prompts.push_back(ids);
    }
    return prompts;
}

// A whole file of little-endian float32 values ([rows][n_vocab] for logits).
inline std::vector<float> read_floats(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    REQUIRE_MESSAGE(in, "cannot open ", path);
    const auto bytes = std::size_t(in.tellg());
    std::vector<float> out(bytes / sizeof(float));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(out.data()), std::streamsize(bytes));
    return out;
}

// sum((a - b)^2) / sum(b^2) over one row of n values, b the reference, in double.
template <class A, class B>
double nmse(const A* a, const B* b, int n) {
    double err = 0, ref = 0;
    for (int i = 0; i < n; ++i) {
        const double d = double(a[i]) - double(b[i]);
        err += d * d;
        ref += double(b[i]) * double(b[i]);
    }
    return err / ref;
}

}  // namespace smol_test
