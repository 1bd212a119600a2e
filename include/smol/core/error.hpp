#pragma once
// smol::Error: the one exception type the library throws. Messages say what was expected,
// what was found and where (file, key or tensor, byte offset).

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace smol {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Its arguments written one after the other with operator<<.
template <class... Parts>
inline std::string concat(Parts&&... parts) {
    std::ostringstream message;
    (message << ... << std::forward<Parts>(parts));
    return message.str();
}

// Concatenates its arguments into the message of a thrown smol::Error.
template <class... Parts>
[[noreturn]] inline void fail(Parts&&... parts) {
    throw Error(concat(std::forward<Parts>(parts)...));
}

}  // namespace smol
