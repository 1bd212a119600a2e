#pragma once
// A byte range of a text. A rendered chat prompt lists where its message text stands with
// these, so the tokenizer can treat those bytes as text only (chat_template.hpp, tokenizer.hpp).

#include <cstddef>

namespace smol::text {

struct TextSpan {
    std::size_t begin = 0;
    std::size_t end = 0;  // one past the last byte
};

}  // namespace smol::text
