// The smallest complete smol program: load a model, chat one turn, stream the reply.
//
//   smol-embed MODEL.gguf "Your question"

#include <cstdio>
#include <iostream>

#include <smol/smol.hpp>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 2;
    }
    try {
        smol::Engine engine(argv[1]);
        smol::ChatSession chat(engine);
        smol::ChatOptions template_options;
        template_options.enable_thinking = false;  // answer at once, no <think> block
        chat.set_template_options(template_options);
        smol::GenerationParams params;
        params.max_tokens = 64;
        const auto result = chat.send(argv[2], params, [](const smol::StreamPiece& piece) {
            std::cout << piece.answer << std::flush;  // piece.reasoning holds the thinking, if on
            return true;
        });
        std::cout << "\n[" << result.usage.completion_tokens << " tokens, " << result.usage.tokens_per_second()
                  << " t/s, stopped: " << smol::to_string(result.finish_reason) << "]\n";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
