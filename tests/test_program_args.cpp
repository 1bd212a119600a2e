// The programs' command-line reader (examples/program_args.hpp): values, missing values, bad
// numbers, comma lists, the flag table every program declares its flags in, and the flag groups
// several programs share. Every mistake must be a UsageError (the programs exit with 2 on it)
// whose message names the flag, what was expected and the text found.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "program_args.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_program_args {

using smol::args::ArgReader;
using smol::args::UsageError;

namespace {

using Ints = std::vector<std::int64_t>;
using Strings = std::vector<std::string>;

// An argv (program name first) that outlives the reader made over it.
class Argv {
public:
    explicit Argv(Strings args) : strings_(std::move(args)) {
        strings_.insert(strings_.begin(), "prog");
        for (const std::string& s : strings_) pointers_.push_back(s.c_str());
    }
    Argv(const Argv&) = delete;  // the pointers point into this object's strings
    Argv& operator=(const Argv&) = delete;
    ArgReader reader() const { return ArgReader(int(pointers_.size()), pointers_.data()); }
    void parse(const smol::args::FlagTable& table) const { table.parse(int(pointers_.size()), pointers_.data()); }
    int argc() const { return int(pointers_.size()); }
    const char* const* argv() const { return pointers_.data(); }

private:
    Strings strings_;
    std::vector<const char*> pointers_;
};

// The message of the UsageError `action` throws, or "" when it throws none.
std::string usage_error(const std::function<void()>& action) {
    try {
        action();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

// The error reading the value of the single flag in `args` with `read` gives.
std::string flag_error(const Strings& args, const std::function<void(ArgReader&)>& read) {
    const Argv argv(args);
    ArgReader reader = argv.reader();
    REQUIRE(reader.next());
    return usage_error([&] { read(reader); });
}

// The message of the UsageError parsing `args` through `table` throws, or "" when it parses.
std::string table_error(const smol::args::FlagTable& table, const Strings& args) {
    const Argv argv(args);
    return usage_error([&] { argv.parse(table); });
}

// The message parse_int_list gives for `text` as -p's value, or "" when it parses.
std::string list_error(const std::string& text, std::int64_t min_value = 0, std::int64_t max_value = 100) {
    return usage_error([&] { smol::args::parse_int_list("-p", text, min_value, max_value); });
}

// What FlagTable::parse_or_exit_status gave and wrote to its two streams.
struct Outcome {
    std::optional<int> status;
    std::string out, err;
};

// All that was written to `file`, a tmpfile().
std::string written(std::FILE* file) {
    std::rewind(file);
    std::string text;
    for (int c; (c = std::fgetc(file)) != EOF;) text += char(c);
    std::fclose(file);
    return text;
}

template <class Caught = UsageError>
Outcome exit_status(const smol::args::FlagTable& table, const Strings& args, const bool& help,
                    const std::function<void()>& check = {}) {
    const Argv argv(args);
    std::FILE* out = std::tmpfile();
    std::FILE* err = std::tmpfile();
    REQUIRE(out);
    REQUIRE(err);
    Outcome outcome;
    outcome.status = table.parse_or_exit_status<Caught>(argv.argc(), argv.argv(), help, "prog", check, out, err);
    outcome.out = written(out);
    outcome.err = written(err);
    return outcome;
}

}  // namespace

TEST_CASE("the reader walks flags, their values and positional arguments in order") {
    const Argv argv({"-m", "model.gguf", "--no-warmup", "file.txt", "-", "-t", "4"});
    ArgReader args = argv.reader();
    REQUIRE(args.next());
    CHECK(args.is("-m", "--model"));
    CHECK_FALSE(args.is("--model"));
    CHECK(args.is_flag());
    CHECK(args.value() == "model.gguf");
    REQUIRE(args.next());
    CHECK(args.is("--no-warmup"));
    CHECK(args.arg() == "--no-warmup");
    REQUIRE(args.next());
    CHECK_FALSE(args.is_flag());  // a positional argument
    CHECK(args.arg() == "file.txt");
    REQUIRE(args.next());
    CHECK_FALSE(args.is_flag());  // "-" names standard input, not a flag
    REQUIRE(args.next());
    CHECK(args.is("--threads", "-t"));
    CHECK(args.integer<int>(1, 1024) == 4);
    CHECK_FALSE(args.next());
    CHECK_FALSE(args.next());

    // A reader can start past leading positional arguments.
    const char* const tail[] = {"prog", "VOCAB.gguf", "OUT", "--count", "7"};
    ArgReader after(5, tail, 3);
    REQUIRE(after.next());
    CHECK(after.is("--count"));
    CHECK(after.integer<int>(1, 10) == 7);
    CHECK_FALSE(after.next());

    // An empty argument matches no flag, not even an empty alias.
    const Argv empty({""});
    ArgReader reader = empty.reader();
    REQUIRE(reader.next());
    CHECK_FALSE(reader.is("-m"));
    CHECK_FALSE(reader.is_flag());
}

TEST_CASE("a flag without its value, or an unknown one, is a usage error naming it") {
    CHECK(flag_error({"-m"}, [](ArgReader& a) { a.value(); }) == "-m needs a value");
    CHECK(flag_error({"--hf-tokenizer"}, [](ArgReader& a) { a.value("an output path"); }) ==
          "--hf-tokenizer needs an output path");
    CHECK(flag_error({"-t"}, [](ArgReader& a) { a.integer<int>(1, 8); }) == "-t needs a value");
    CHECK(flag_error({"-p"}, [](ArgReader& a) { a.int_list(0, 8); }) == "-p needs a value");
    CHECK(flag_error({"--frobnicate"}, [](ArgReader& a) { a.unknown(); }) == "unknown argument '--frobnicate'");

    // A value that looks like a flag is still the value: "-p -5" is -p's text "-5".
    CHECK(flag_error({"-r", "--stop"}, [](ArgReader& a) { CHECK(a.value() == "--stop"); }).empty());
}

TEST_CASE("integers: whole decimal text inside the range; the error names flag, range and text") {
    CHECK(smol::args::parse_integer<int>("-t", "4", 1, 1024) == 4);
    CHECK(smol::args::parse_integer<int>("-t", "1", 1, 1024) == 1);
    CHECK(smol::args::parse_integer<int>("-t", "1024", 1, 1024) == 1024);
    CHECK(smol::args::parse_integer<int>("-n", "-1") == -1);
    CHECK(smol::args::parse_integer<int>("-c", "007", 0) == 7);
    CHECK(smol::args::parse_integer<std::uint64_t>("--seed", "18446744073709551615") ==
          std::numeric_limits<std::uint64_t>::max());

    auto error = [](const std::string& text, int min_value, int max_value) {
        return usage_error([&] { smol::args::parse_integer<int>("-t", text, min_value, max_value); });
    };
    CHECK(error("0", 1, 1024) == "-t: expected an integer from 1 to 1024, found '0'");
    CHECK(error("1025", 1, 1024) == "-t: expected an integer from 1 to 1024, found '1025'");
    CHECK(error("", 1, 1024) == "-t: expected an integer from 1 to 1024, found ''");
    for (const char* bad : {"x", "4x", " 4", "4 ", "+4", "4.0", "0x10", "1e3", "--4"}) {
        CAPTURE(bad);
        CHECK(error(bad, 1, 1024) == std::string("-t: expected an integer from 1 to 1024, found '") + bad + "'");
    }
    // Past the type's range: an error, not a value wrapped into the accepted range.
    CHECK(error("4294967297", 0, std::numeric_limits<int>::max()) == "-t: expected an integer >= 0, found '4294967297'");
    CHECK(usage_error([] { smol::args::parse_integer<std::uint64_t>("--seed", "18446744073709551616"); }) ==
          "--seed: expected an integer >= 0, found '18446744073709551616'");
    CHECK(usage_error([] { smol::args::parse_integer<std::uint64_t>("--seed", "-1"); }) ==
          "--seed: expected an integer >= 0, found '-1'");
    // Open ends are said as such.
    CHECK(error("-2", -1, std::numeric_limits<int>::max()) == "-t: expected an integer >= -1, found '-2'");
    CHECK(error("9", std::numeric_limits<int>::min(), 8) == "-t: expected an integer <= 8, found '9'");
    CHECK(usage_error([] { smol::args::parse_integer<int>("-n", "many"); }) == "-n: expected an integer, found 'many'");

    // The reader's integer() names the flag as given on the command line.
    CHECK(flag_error({"--threads", "0"}, [](ArgReader& a) { a.integer<int>(1, 1024); }) ==
          "--threads: expected an integer from 1 to 1024, found '0'");
    CHECK(flag_error({"--max-body", "12"}, [](ArgReader& a) { a.integer<std::size_t>(1024, std::size_t(1) << 32); }) ==
          "--max-body: expected an integer from 1024 to 4294967296, found '12'");
}

TEST_CASE("numbers: strtod's text, all of it, inside the range when there is one") {
    CHECK(smol::args::parse_number("--hang-up", "0.05", 0.0, 1.0) == 0.05);
    CHECK(smol::args::parse_number("--hang-up", "1", 0.0, 1.0) == 1.0);
    CHECK(smol::args::parse_number("--hang-up", "0", 0.0, 1.0) == 0.0);
    CHECK(smol::args::parse_number<float>("--temp", "0.6") == 0.6f);
    CHECK(smol::args::parse_number<float>("--temp", "-2.5e1") == -25.0f);

    CHECK(usage_error([] { smol::args::parse_number("--hang-up", "1.5", 0.0, 1.0); }) ==
          "--hang-up: expected a number from 0 to 1, found '1.5'");
    CHECK(usage_error([] { smol::args::parse_number("--hang-up", "nan", 0.0, 1.0); }) ==
          "--hang-up: expected a number from 0 to 1, found 'nan'");
    CHECK(usage_error([] { smol::args::parse_number("--hang-up", "", 0.0, 1.0); }) ==
          "--hang-up: expected a number from 0 to 1, found ''");
    for (const char* bad : {"warm", "0.5x", "0.5 ", "", "1e999"}) {
        CAPTURE(bad);
        CHECK(usage_error([&] { smol::args::parse_number<float>("--temp", bad); }) ==
              std::string("--temp: expected a number, found '") + bad + "'");
    }
    CHECK(usage_error([] { smol::args::parse_number<float>("--temp", "1e-60"); }) ==
          "--temp: expected a number, found '1e-60'");  // underflows a float

    CHECK(flag_error({"--top-p", "high"}, [](ArgReader& a) { a.number<float>(); }) ==
          "--top-p: expected a number, found 'high'");
}

TEST_CASE("split_commas keeps empty items so callers see stray commas") {
    CHECK(smol::args::split_commas("a.gguf,b.gguf") == Strings{"a.gguf", "b.gguf"});
    CHECK(smol::args::split_commas("one") == Strings{"one"});
    CHECK(smol::args::split_commas("") == Strings{""});
    CHECK(smol::args::split_commas("a,,b,") == Strings{"a", "", "b", ""});
    CHECK(smol::args::split_commas(",") == Strings{"", ""});

    const Argv argv({"--cors", "http://a.test,*"});
    ArgReader args = argv.reader();
    REQUIRE(args.next());
    CHECK(args.list() == Strings{"http://a.test", "*"});
}

TEST_CASE("parse_int_list reads every item in order, bounds included") {
    CHECK(smol::args::parse_int_list("-p", "512", 0, 1000) == Ints{512});
    CHECK(smol::args::parse_int_list("-p", "0,128,1000", 0, 1000) == Ints{0, 128, 1000});
    CHECK(smol::args::parse_int_list("-t", "-3,-1", -3, -1) == Ints{-3, -1});
    CHECK(smol::args::parse_int_list("--tokens", "2147483647", 0, INT32_MAX) == Ints{INT32_MAX});
    CHECK(smol::args::parse_int_list("-p", "007", 0, 10) == Ints{7});
}

TEST_CASE("parse_int_list rejects malformed and out-of-range items, naming flag and item") {
    // Each bad item is reported by itself, so a long list points at the culprit.
    CHECK(list_error("1,x,3") == "-p: expected comma-separated integers from 0 to 100, found 'x' in '1,x,3'");
    CHECK(list_error("") == "-p: expected comma-separated integers from 0 to 100, found '' in ''");
    CHECK(list_error("1,,2").find("found '' in '1,,2'") != std::string::npos);
    CHECK(list_error("1,2,").find("found '' in '1,2,'") != std::string::npos);
    CHECK(list_error("12abc").find("found '12abc'") != std::string::npos);
    CHECK(list_error(" 5").find("found ' 5'") != std::string::npos);
    CHECK(list_error("5 ").find("found '5 '") != std::string::npos);
    CHECK(list_error("+5").find("found '+5'") != std::string::npos);
    CHECK(list_error("1.5").find("found '1.5'") != std::string::npos);
    CHECK(list_error("101").find("found '101'") != std::string::npos);
    CHECK(list_error("0", 1).find("from 1 to 100, found '0'") != std::string::npos);
    CHECK(list_error("-1").find("found '-1'") != std::string::npos);
    // Beyond int64: from_chars reports out of range instead of wrapping into the accepted range.
    CHECK(list_error("18446744073709551621").find("found '18446744073709551621'") != std::string::npos);
    CHECK(list_error("2147483648", 0, INT32_MAX).find("found '2147483648'") != std::string::npos);
}

TEST_CASE("parse_int_list names what the items are when the caller says") {
    CHECK(usage_error([] { smol::args::parse_int_list("--tokens", "1,-2", 0, INT32_MAX, "token ids"); }) ==
          "--tokens: expected comma-separated token ids from 0 to 2147483647, found '-2' in '1,-2'");
    CHECK(flag_error({"--ban-tokens", "5,x"}, [](ArgReader& a) { a.int_list(0, 1 << 30, "token ids"); }) ==
          "--ban-tokens: expected comma-separated token ids from 0 to 1073741824, found 'x' in '5,x'");
}

TEST_CASE("choice takes one of the listed words and lists them all when it is not") {
    CHECK(flag_error({"-o", "json"}, [](ArgReader& a) { CHECK(a.choice({"md", "json"}) == "json"); }).empty());
    CHECK(flag_error({"-o", "csv"}, [](ArgReader& a) { a.choice({"md", "json"}); }) == "-o: expected md or json, found 'csv'");
    CHECK(flag_error({"--output", "JSON"}, [](ArgReader& a) { a.choice({"md", "json"}); }) ==
          "--output: expected md or json, found 'JSON'");
    CHECK(flag_error({"--mode", "x"}, [](ArgReader& a) { a.choice({"a", "b", "c"}); }) == "--mode: expected a, b or c, found 'x'");
}

TEST_CASE("a flag table parses, checks and describes its rows from one declaration") {
    using namespace smol::args;
    int count = 3;
    bool verbose = false;
    std::string name = "smol";
    std::vector<std::string> files;
    FlagTable table("usage: prog [options] FILE...");
    table.add({{"-n", "--count"}, "N", "how many", integer_value(count, 1, 8)})
        .add({{"-v", "--verbose"}, "", "say more", switch_value(verbose, true)})
        .note("Naming:")
        .add({{"--name"}, "TEXT", "what to call it", text_value(name)})
        .positional([&files](const std::string& file) { files.push_back(file); });

    Argv({"a.txt", "--count", "5", "-v", "--name", "", "b.txt", "-n", "2"}).parse(table);
    CHECK(count == 2);  // the last one wins
    CHECK(verbose);
    CHECK(name.empty());
    CHECK(files == Strings{"a.txt", "b.txt"});

    CHECK(table_error(table, {"-n", "9"}) == "-n: expected an integer from 1 to 8, found '9'");
    CHECK(table_error(table, {"--count"}) == "--count needs an integer from 1 to 8");
    CHECK(table_error(table, {"--name"}) == "--name needs a value");
    CHECK(table_error(table, {"--frobnicate"}) == "unknown argument '--frobnicate'");
    CHECK(table_error(table, {"-v=1"}) == "unknown argument '-v=1'");

    // The help is made from the rows: names, placeholder, text, range and the default each row
    // had when the table was made (count is 2 by now, so it is a new table's default that shows).
    int fresh_count = 3;
    bool fresh_verbose = false;
    std::string fresh_name = "smol";
    FlagTable fresh("usage: prog [options] FILE...");
    fresh.add({{"-n", "--count"}, "N", "how many", integer_value(fresh_count, 1, 8)})
        .add({{"-v", "--verbose"}, "", "say more", switch_value(fresh_verbose, true)})
        .note("Naming:")
        .add({{"--name"}, "TEXT", "what to call it", text_value(fresh_name)});
    CHECK(fresh.help() ==
          "usage: prog [options] FILE...\n"
          "  -n, --count N             how many [an integer from 1 to 8; default: 3]\n"
          "  -v, --verbose             say more\n"
          "Naming:\n"
          "  --name TEXT               what to call it [default: smol]\n");

    // Without a positional reader, a bare argument is an error; a name twice is a programming error.
    FlagTable strict("usage: strict");
    strict.add({{"-v"}, "", "say more", switch_value(verbose, true)});
    CHECK(table_error(strict, {"file.txt"}) == "unknown argument 'file.txt'");
    CHECK_THROWS_AS(strict.add({{"--verbose", "-v"}, "", "again", switch_value(verbose, false)}), std::logic_error);
}

TEST_CASE("parse_or_exit_status: --help gives 0, a mistake 2 with 'PROGRAM: message' and the help") {
    using namespace smol::args;
    int count = 0;
    bool help = false;
    FlagTable table("usage: prog -n N");
    table.add({{"-n", "--count"}, "N", "how many", integer_value(count, 1, 8)}).add(help_flag(help));
    const auto count_required = [&] {
        if (count == 0) throw UsageError("-n is required");
    };

    // --help: the help on the first stream and 0, before the program's own checks run.
    const Outcome helped = exit_status(table, {"--help"}, help, count_required);
    CHECK(helped.status == 0);
    CHECK(helped.out == table.help());
    CHECK(helped.err.empty());
    help = false;

    // A flag's mistake, an unknown flag and the program's own check: 2, the message, the help.
    const Outcome bad_value = exit_status(table, {"-n", "9"}, help, count_required);
    CHECK(bad_value.status == 2);
    CHECK(bad_value.out.empty());
    CHECK(bad_value.err == "prog: -n: expected an integer from 1 to 8, found '9'\n" + table.help());
    const Outcome unknown = exit_status(table, {"--frobnicate"}, help, count_required);
    CHECK(unknown.status == 2);
    CHECK(unknown.err == "prog: unknown argument '--frobnicate'\n" + table.help());
    count = 0;
    const Outcome missing = exit_status(table, {}, help, count_required);
    CHECK(missing.status == 2);
    CHECK(missing.err == "prog: -n is required\n" + table.help());

    // All well: nothing written, the program goes on with the flags read.
    const Outcome fine = exit_status(table, {"-n", "3"}, help, count_required);
    CHECK_FALSE(fine.status.has_value());
    CHECK(count == 3);
    CHECK(fine.out.empty());
    CHECK(fine.err.empty());

    // Only UsageError is a usage mistake unless the program says any error is.
    const auto failing = [] { throw std::runtime_error("cannot read the grammar"); };
    CHECK_THROWS_AS(exit_status(table, {"-n", "3"}, help, failing), std::runtime_error);
    const Outcome any = exit_status<std::exception>(table, {"-n", "3"}, help, failing);
    CHECK(any.status == 2);
    CHECK(any.err == "prog: cannot read the grammar\n" + table.help());
}

TEST_CASE("help rows wrap at the help width, under the help column") {
    using namespace smol::args;
    std::string text;
    std::string long_help;
    for (int i = 0; i < 40; ++i) long_help += "word ";
    const std::string row = FlagTable::help_row({{"--a-rather-long-flag-name"}, "PLACEHOLDER", long_help, text_value(text)});
    std::size_t start = 0, lines = 0;
    while (start < row.size()) {
        const std::size_t end = row.find('\n', start);
        const std::string line = row.substr(start, end - start);
        CHECK(line.size() <= FlagTable::kHelpWidth);
        if (lines > 0) CHECK(line.rfind(std::string(FlagTable::kHelpColumn, ' '), 0) == 0);
        start = end + 1;
        ++lines;
    }
    CHECK(lines >= 3);  // the names alone pass the column, so the text starts on the next line
    CHECK(row.rfind("  --a-rather-long-flag-name PLACEHOLDER\n", 0) == 0);
}

// Every row of the shared groups, in one table, as a program that includes them all has them.
struct SharedFlags {
    std::string model, hf_repo, hf_file;
    int threads = 0, context = 0;
    smol::RopeScalingRequest rope;
    smol::KvCacheTypes cache;
    bool repack = true;
    smol::SpeculationParams speculation;
    smol::SamplerParams sampling;
    smol::args::FlagTable table{"usage: prog"};
    SharedFlags() {
        using namespace smol::args;
        table.add(model_flag(model))
            .add(hub_flags(hf_repo, hf_file))
            .add(threads_flag(threads))
            .add(context_flag(context))
            .add(rope_scaling_flags(rope))
            .add(kv_cache_type_flags(cache))
            .add(repack_flag(repack))
            .add(speculation_flags(speculation))
            .add(sampling_flags(sampling));
    }
    std::string error(const Strings& args) const { return table_error(table, args); }
};

TEST_CASE("the shared groups: llama.cpp's names, one range each, listed in the help") {
    SharedFlags f;
    Argv({"-m", "m.gguf", "-hf", "org/repo:Q8_0", "--hf-file", "x.gguf", "-t", "0", "-c", "0"}).parse(f.table);
    CHECK(f.model == "m.gguf");
    CHECK(f.hf_repo == "org/repo:Q8_0");
    CHECK(f.hf_file == "x.gguf");
    CHECK(f.threads == 0);
    CHECK(f.context == 0);
    Argv({"--threads", "1024", "--ctx-size", "1048576"}).parse(f.table);
    CHECK(f.threads == 1024);
    CHECK(f.context == 1 << 20);
    CHECK(f.error({"-t", "-1"}) == "-t: expected an integer from 0 to 1024, found '-1'");
    CHECK(f.error({"-t", "1025"}) == "-t: expected an integer from 0 to 1024, found '1025'");
    CHECK(f.error({"-c", "-1"}) == "-c: expected an integer from 0 to 1048576, found '-1'");

    const std::string help = f.table.help();
    for (const smol::args::Flag& flag : f.table.flags())
        for (const std::string& name : flag.names) CHECK_MESSAGE(help.find(name) != std::string::npos, name);
    CHECK(help.find("  -t, --threads N ") != std::string::npos);
    CHECK(help.find("an integer from 0 to 1024; default: 0]") != std::string::npos);
}

TEST_CASE("the RoPE flags read llama.cpp's names and values into a RopeScalingRequest") {
    SharedFlags f;
    Argv({"--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "64"}).parse(f.table);
    CHECK(f.rope.type == smol::RopeScaling::Type::yarn);
    CHECK(f.rope.factor == 4.0);
    CHECK(f.rope.original_context == 64);
    Argv({"--rope-scaling", "none"}).parse(f.table);
    CHECK(f.rope.type == smol::RopeScaling::Type::none);

    CHECK(f.error({"--rope-scaling", "linear"}) ==
          "--rope-scaling: expected none or yarn (linear scaling is not supported), found 'linear'");
    CHECK(f.error({"--rope-scale", "0.5"}) == "--rope-scale: expected a factor of at least 1, found '0.5'");
    CHECK(f.error({"--rope-scale", "inf"}) == "--rope-scale: expected a factor of at least 1, found 'inf'");
    CHECK(f.error({"--rope-scale", "2x"}) == "--rope-scale: expected a factor of at least 1, found '2x'");
    CHECK(f.error({"--rope-scale", ""}) == "--rope-scale: expected a factor of at least 1, found ''");
    CHECK(f.error({"--yarn-orig-ctx", "0"}) == "--yarn-orig-ctx: expected an integer from 1 to 16777216, found '0'");
    CHECK(f.error({"--yarn-orig-ctx", "64k"}) == "--yarn-orig-ctx: expected an integer from 1 to 16777216, found '64k'");
    CHECK(f.error({"--rope-scale"}) == "--rope-scale needs a factor of at least 1");

    const std::string help = f.table.help();
    for (const char* flag : {"--rope-scaling none|yarn", "--rope-scale F", "--yarn-orig-ctx N"})
        CHECK(help.find(std::string("  ") + flag + " ") != std::string::npos);
}

TEST_CASE("-nr / --no-repack turns weight regrouping off, as llama.cpp's flag does") {
    for (const char* flag : {"-nr", "--no-repack"}) {
        SharedFlags f;
        Argv({flag}).parse(f.table);
        CHECK_FALSE(f.repack);
        CHECK(f.error({"-nrx"}) == "unknown argument '-nrx'");
    }
    CHECK(SharedFlags().table.help().find("  -nr, --no-repack ") != std::string::npos);
}

TEST_CASE("the cache-type flags take llama.cpp's names and values") {
    SharedFlags f;
    Argv({"-ctk", "q8_0", "--cache-type-v", "q4_0"}).parse(f.table);
    CHECK(f.cache == smol::KvCacheTypes{smol::KvType::q8_0, smol::KvType::q4_0});
    CHECK(f.error({"-ct", "q8_0"}) == "unknown argument '-ct'");
    CHECK(f.error({"-ctv", "q5_1"}) == "-ctv: expected f16, q8_0 or q4_0, found 'q5_1'");
    CHECK(f.error({"--cache-type-k", "F16"}) == "--cache-type-k: expected f16, q8_0 or q4_0, found 'F16'");
    CHECK(f.cache == smol::KvCacheTypes{smol::KvType::q8_0, smol::KvType::q4_0});  // a bad value changes nothing

    const std::string help = f.table.help();
    CHECK(help.find("  -ctk, --cache-type-k T ") != std::string::npos);
    CHECK(help.find("  -ctv, --cache-type-v T ") != std::string::npos);
}

TEST_CASE("the speculation flags take llama.cpp's names, bounded") {
    SharedFlags f;
    Argv({"--spec", "ngram", "--draft-max", "8", "--draft-min", "2"}).parse(f.table);
    CHECK(f.speculation.type == smol::SpeculationType::ngram);
    Argv({"--spec-type", "none"}).parse(f.table);
    CHECK(f.speculation.type == smol::SpeculationType::none);  // the last one wins
    CHECK(f.speculation.draft_max == 8);
    CHECK(f.speculation.draft_min == 2);

    CHECK(f.error({"--spec", "eagle"}) == "--spec: expected none or ngram, found 'eagle'");
    CHECK(f.error({"--draft-max", "65"}) == "--draft-max: expected an integer from 1 to 64, found '65'");
    CHECK(f.error({"--draft-min", "-1"}) == "--draft-min: expected an integer from 0 to 64, found '-1'");
    CHECK(f.speculation.type == smol::SpeculationType::none);

    const std::string help = f.table.help();
    for (const char* flag : {"--spec, --spec-type none|ngram", "--draft-max, --spec-draft-n-max N", "--draft-min, --spec-draft-n-min N"})
        CHECK(help.find(std::string("  ") + flag) != std::string::npos);
}

TEST_CASE("the sampling flags take llama.cpp's names, in the ranges the sampler accepts") {
    SharedFlags f;
    Argv({"-s", "7", "--temp", "0.25", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--repeat-penalty", "1.5",
          "--repeat-last-n", "0", "--presence-penalty", "-0.5", "--frequency-penalty", "2"})
        .parse(f.table);
    CHECK(f.sampling.seed == 7);
    CHECK(f.sampling.temperature == 0.25f);
    CHECK(f.sampling.top_k == 0);
    CHECK(f.sampling.top_p == 1.0f);
    CHECK(f.sampling.min_p == 0.0f);
    CHECK(f.sampling.repeat_penalty == 1.5f);
    CHECK(f.sampling.penalty_last_n == 0);
    CHECK(f.sampling.presence_penalty == -0.5f);
    CHECK(f.sampling.frequency_penalty == 2.0f);
    Argv({"--seed", "-1"}).parse(f.table);
    CHECK(f.sampling.seed == SMOL_DEFAULT_SEED);
    smol::Sampler accepted(f.sampling, 8);  // whatever the flags accept, the sampler does

    CHECK(f.error({"-s", "-2"}) == "-s: expected -1 or an integer >= 0, found '-2'");
    CHECK(f.error({"--temp", "nan"}) == "--temp: expected a number, found 'nan'");
    CHECK(f.error({"--top-k", "-1"}) == "--top-k: expected an integer >= 0, found '-1'");
    CHECK(f.error({"--top-p", "0"}) == "--top-p: expected a number above 0 and at most 1, found '0'");
    CHECK(f.error({"--top-p", "1.5"}) == "--top-p: expected a number above 0 and at most 1, found '1.5'");
    CHECK(f.error({"--min-p", "2"}) == "--min-p: expected a number from 0 to 1, found '2'");
    CHECK(f.error({"--repeat-penalty", "0"}) == "--repeat-penalty: expected a finite number above 0, found '0'");
    CHECK(f.error({"--presence-penalty", "inf"}) == "--presence-penalty: expected a finite number, found 'inf'");
    CHECK(f.error({"--repeat-last-n", "-1"}) == "--repeat-last-n: expected an integer >= 0, found '-1'");

    // Defaults come from SamplerParams, so the help cannot disagree with the sampler.
    const std::string help = SharedFlags().table.help();
    CHECK(help.find("  --temp T ") != std::string::npos);
    CHECK(help.find("default: 0.6]") != std::string::npos);
    CHECK(help.find("default: 0.95]") != std::string::npos);
}

TEST_CASE("the further sampling flags take llama.cpp's names, bounded") {
    SharedFlags f;
    Argv({"--typical", "0.9", "--top-nsigma", "1.5", "--xtc-probability", "0.5", "--xtc-threshold", "0.2",
          "--dry-multiplier", "0.8", "--dry-base", "2", "--dry-allowed-length", "3", "--dry-penalty-last-n", "128",
          "--dry-sequence-breaker", "\\n", "--dry-sequence-breaker", "User:", "--mirostat", "2", "--mirostat-lr", "0.2",
          "--mirostat-ent", "4", "--samplers", "dry;top-k;typical;temp"})
        .parse(f.table);
    const smol::SamplerParams& params = f.sampling;
    CHECK(params.typical_p == doctest::Approx(0.9));
    CHECK(params.top_n_sigma == doctest::Approx(1.5));
    CHECK(params.xtc_probability == doctest::Approx(0.5));
    CHECK(params.xtc_threshold == doctest::Approx(0.2));
    CHECK(params.dry_multiplier == doctest::Approx(0.8));
    CHECK(params.dry_base == doctest::Approx(2.0));
    CHECK(params.dry_allowed_length == 3);
    CHECK(params.dry_penalty_last_n == 128);
    CHECK(params.dry_sequence_breakers == std::vector<std::string>{"\n", "User:"});  // the first replaced the defaults
    CHECK(params.mirostat == 2);
    CHECK(params.mirostat_eta == doctest::Approx(0.2));
    CHECK(params.mirostat_tau == doctest::Approx(4.0));
    using Stage = smol::SamplerStage;
    CHECK(params.samplers == std::vector<Stage>{Stage::dry, Stage::top_k, Stage::typical_p, Stage::temperature});
    smol::Sampler accepted(f.sampling, 8);  // whatever the flags accept, the sampler does

    {
        SharedFlags g;
        Argv({"--sampling-seq", "kxt", "--dry-sequence-breaker", "none"}).parse(g.table);
        CHECK(g.sampling.samplers == std::vector<Stage>{Stage::top_k, Stage::xtc, Stage::temperature});
        CHECK(g.sampling.dry_sequence_breakers.empty());
    }

    CHECK(f.error({"--samplers", "top_k;bogus"}).find("--samplers: expected sampler names") == 0);
    CHECK(f.error({"--samplers", "top_k;bogus"}).find("'bogus'") != std::string::npos);
    CHECK(f.error({"--sampling-seq", "kq"}).find("--sampling-seq") == 0);
    CHECK(f.error({"--mirostat", "3"}).find("--mirostat") == 0);
    CHECK(f.error({"--xtc-probability", "1.5"}).find("--xtc-probability") == 0);
    CHECK(f.error({"--dry-base", "0.5"}).find("--dry-base") == 0);
    CHECK(f.error({"--dry-penalty-last-n", "-2"}).find("--dry-penalty-last-n") == 0);
    CHECK(f.error({"--dry-sequence-breaker", std::string(41, 'a')}).find("--dry-sequence-breaker") == 0);
    CHECK(f.error({"--typical", "2"}).find("--typical") == 0);

    const std::string help = f.table.help();
    for (const char* flag : {"--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n",
                             "--dry-sequence-breaker", "--xtc-probability", "--xtc-threshold", "--typical",
                             "--top-nsigma", "--mirostat ", "--mirostat-lr", "--mirostat-ent", "--samplers", "--sampling-seq"}) {
        CAPTURE(flag);
        CHECK(help.find(std::string("  ") + flag) != std::string::npos);
    }
}

}  // namespace test_program_args
