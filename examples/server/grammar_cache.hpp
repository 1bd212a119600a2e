#pragma once
// The GBNF grammars requests sent, compiled for the model and kept for the requests that send
// the same text again (the tokens each grammar state allows are learnt once per compiled
// grammar).

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "api_request.hpp"
#include "smol/smol.hpp"

namespace smol_server {

class GrammarCache {
public:
    // The grammar `text` compiled for `engine`'s model; 400 when invalid or past the grammar
    // limits. Compiled outside the cache's lock, on the request's own thread, so a slow compile
    // never holds up another request (two requests with one new text may both compile it; the
    // first to finish is kept).
    std::shared_ptr<const smol::TokenGrammar> get(const std::string& text, const smol::Engine& engine) {
        {
            std::lock_guard lock(mutex_);
            if (const auto it = grammars_.find(text); it != grammars_.end()) return it->second;
        }
        std::shared_ptr<const smol::TokenGrammar> compiled;
        try {
            compiled = engine.compile_grammar(text);
        } catch (const smol::text::GrammarTooComplex& e) {
            reject(400, e.what(), "grammar_too_complex");
        } catch (const smol::Error& e) {
            reject(400, e.what(), "invalid_grammar");
        }
        std::lock_guard lock(mutex_);
        if (grammars_.size() >= kMaxGrammars) grammars_.clear();
        return grammars_.try_emplace(text, compiled).first->second;
    }

private:
    // Past this many different texts the cache starts over, so clients cannot grow it unbounded.
    static constexpr std::size_t kMaxGrammars = 16;

    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<const smol::TokenGrammar>> grammars_;
};

}  // namespace smol_server
