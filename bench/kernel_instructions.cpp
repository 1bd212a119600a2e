// Runs one kernel of one kernel set on seeded data, between two marker calls, so that
// scripts/kernel-instructions.sh can count the instructions it executes under qemu's instruction
// log (a static binary: the markers' addresses are fixed). Not a benchmark: the count is what it
// reports, and the kernel runs only a few times.
// usage: kernel-instructions ISA TYPE decode|prompt BLOCKS REPS
//   decode: one kernel call of kTileRows weight rows against one activation column;
//   prompt: a 16-row by 16-token tile, through the set's prompt GEMM where it has one for 16
//           tokens, else through its tiles, as matmul would run it.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "smol/smol.hpp"

extern "C" __attribute__((noinline)) void count_begin() { __asm__ volatile(""); }
extern "C" __attribute__((noinline)) void count_end() { __asm__ volatile(""); }

namespace {

smol::TensorType type_named(const std::string& name) {
    for (std::uint32_t id = 0; id < 64; ++id)
        if (const auto traits = smol::tensor_type_traits(id); traits && traits->name == name) return traits->type;
    smol::fail("kernel-instructions: expected a tensor type name such as Q4_K, found '", name, "'");
}

std::vector<float> seeded_floats(std::size_t count, std::uint32_t seed) {
    std::vector<float> values(count);
    for (float& v : values) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        v = float(std::int32_t(seed % 2001) - 1000) / 997.0f;
    }
    return values;
}

// `rows` rows of n values in a type, through its reference quantizer (or as floats; a type smol
// cannot write as encode_test_row makes it).
std::vector<std::uint8_t> encode_rows(smol::TensorType type, int rows, std::int64_t n, std::uint32_t seed) {
    const smol::TypeRow& row = smol::type_row(type, "kernel-instructions");
    const std::size_t row_bytes = std::size_t(n) / row.block_elements * row.block_bytes;
    std::vector<std::uint8_t> bytes(std::size_t(rows) * row_bytes);
    for (int r = 0; r < rows; ++r) {
        const std::vector<float> x = seeded_floats(std::size_t(n), seed + std::uint32_t(r));
        if (type == smol::TensorType::F32)
            std::memcpy(bytes.data() + std::size_t(r) * row_bytes, x.data(), row_bytes);
        else
            smol::encode_test_row(type, x.data(), bytes.data() + std::size_t(r) * row_bytes, n);
    }
    return bytes;
}

}  // namespace

int main(int argc, char** argv) try {
    if (argc != 6) smol::fail("usage: kernel-instructions ISA TYPE decode|prompt BLOCKS REPS");
    const smol::KernelSet set = smol::kernels_for(smol::parse_isa(argv[1]));
    const smol::TensorType type = type_named(argv[2]);
    const std::string kind = argv[3];
    const int blocks = std::atoi(argv[4]), reps = std::atoi(argv[5]);
    const smol::TypeRow& row = smol::weight_row(type);
    const std::int64_t n = std::int64_t(blocks) * std::int64_t(row.block_elements == 1 ? smol::QK_K : row.block_elements);
    const std::size_t row_bytes = std::size_t(n) / row.block_elements * row.block_bytes;
    const int rows = kind == "decode" ? smol::kTileRows : 16, tokens = kind == "decode" ? 1 : 16;
    const std::vector<std::uint8_t> weights = encode_rows(type, rows, n, 1);
    const std::vector<std::uint8_t> acts = encode_rows(row.activations, tokens, n, 1000);
    const std::size_t act_stride = acts.size() / std::size_t(tokens);
    std::vector<float> out(std::size_t(rows) * std::size_t(tokens));

    const smol::KernelSet::Gemm gemm = kind == "prompt" ? set.gemm_for_weights(type, tokens) : smol::KernelSet::Gemm{};
    std::vector<smol::BlockQ8Kx16> packed;
    if (gemm.fn != nullptr) {
        packed.resize(std::size_t(n / smol::QK_K));
        smol::pack_q8k_x16(reinterpret_cast<const smol::BlockQ8K*>(acts.data()), tokens, n / smol::QK_K, packed.data());
    }
    const smol::DotTileFn tile = set.for_weights(type);
    count_begin();
    for (int rep = 0; rep < reps; ++rep) {
        if (gemm.fn != nullptr) {
            for (int r = 0; r < rows; r += gemm.shape.rows)
                gemm.fn(n, weights.data() + std::size_t(r) * row_bytes, row_bytes, std::min(gemm.shape.rows, rows - r),
                        packed.data(), tokens, out.data() + r, std::size_t(rows));
        } else {
            for (int t = 0; t < tokens; t += smol::kTileCols)
                for (int r = 0; r < rows; r += smol::kTileRows)
                    tile(n, weights.data() + std::size_t(r) * row_bytes, row_bytes, std::min(smol::kTileRows, rows - r),
                         acts.data() + std::size_t(t) * act_stride, act_stride, std::min(smol::kTileCols, tokens - t),
                         out.data() + std::size_t(t) * std::size_t(rows) + std::size_t(r), std::size_t(rows));
        }
    }
    count_end();
    std::printf("%s %s %s: %d rows by %d tokens via %s, out[0] = %g\n", argv[1], argv[2], kind.c_str(), rows, tokens,
                gemm.fn != nullptr ? "gemm" : "tiles", double(out[0]));
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "kernel-instructions: %s\n", e.what());
    return 1;
}
