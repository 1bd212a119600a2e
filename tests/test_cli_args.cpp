// The programs' comma-separated list flags (smol/core/comma_list.hpp): what they accept, what they
// reject and what the error says.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "smol/core/comma_list.hpp"

namespace {

using Ints = std::vector<std::int64_t>;
using Strings = std::vector<std::string>;

// The message parse_int_list throws for `text`, or "" when it parses.
std::string error_of(const std::string& text, std::int64_t min_value = 0, std::int64_t max_value = 100) {
    try {
        smol::parse_int_list("-p", text, min_value, max_value);
    } catch (const smol::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("split_commas keeps empty items so callers see stray commas") {
    CHECK(smol::split_commas("a.gguf,b.gguf") == Strings{"a.gguf", "b.gguf"});
    CHECK(smol::split_commas("one") == Strings{"one"});
    CHECK(smol::split_commas("") == Strings{""});
    CHECK(smol::split_commas("a,,b,") == Strings{"a", "", "b", ""});
    CHECK(smol::split_commas(",") == Strings{"", ""});
}

TEST_CASE("parse_int_list reads every item in order, bounds included") {
    CHECK(smol::parse_int_list("-p", "512", 0, 1000) == Ints{512});
    CHECK(smol::parse_int_list("-p", "0,128,1000", 0, 1000) == Ints{0, 128, 1000});
    CHECK(smol::parse_int_list("-t", "-3,-1", -3, -1) == Ints{-3, -1});
    CHECK(smol::parse_int_list("--tokens", "2147483647", 0, INT32_MAX) == Ints{INT32_MAX});
    CHECK(smol::parse_int_list("-p", "007", 0, 10) == Ints{7});
}

TEST_CASE("parse_int_list rejects malformed and out-of-range items, naming flag and item") {
    // Each bad item is reported by itself, so a long list points at the culprit.
    CHECK(error_of("1,x,3") == "-p: expected comma-separated integers from 0 to 100, found 'x' in '1,x,3'");
    CHECK(error_of("") == "-p: expected comma-separated integers from 0 to 100, found '' in ''");
    CHECK(error_of("1,,2").find("found '' in '1,,2'") != std::string::npos);
    CHECK(error_of("1,2,").find("found '' in '1,2,'") != std::string::npos);
    CHECK(error_of("12abc").find("found '12abc'") != std::string::npos);
    CHECK(error_of(" 5").find("found ' 5'") != std::string::npos);
    CHECK(error_of("5 ").find("found '5 '") != std::string::npos);
    CHECK(error_of("+5").find("found '+5'") != std::string::npos);
    CHECK(error_of("1.5").find("found '1.5'") != std::string::npos);
    CHECK(error_of("101").find("found '101'") != std::string::npos);
    CHECK(error_of("0", 1).find("from 1 to 100, found '0'") != std::string::npos);
    CHECK(error_of("-1").find("found '-1'") != std::string::npos);
    // Beyond int64: from_chars reports out of range instead of wrapping into the accepted range.
    CHECK(error_of("18446744073709551621").find("found '18446744073709551621'") != std::string::npos);
    CHECK(error_of("2147483648", 0, INT32_MAX).find("found '2147483648'") != std::string::npos);
}

TEST_CASE("parse_int_list names what the items are when the caller says") {
    try {
        smol::parse_int_list("--tokens", "1,-2", 0, INT32_MAX, "token ids");
        FAIL("a negative token id was accepted");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()) == "--tokens: expected comma-separated token ids from 0 to 2147483647, found '-2' in '1,-2'");
    }
}
