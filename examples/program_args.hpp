#pragma once
// The programs' command lines (smol-cli, smol-server, bench/ and tools/). Each program declares
// its flags in one FlagTable: names, value kind and range, default and help text per row, bound
// to the option it sets. Parsing, validation and --help all read that table, so the help cannot
// drift from what is accepted. The flags several programs share (model, threads, context, RoPE,
// KV cache types, sampling, speculation) are defined once below as groups that the tables
// include, with one meaning and range everywhere (llama.cpp's names and conventions). Not part
// of the library: the library takes the parsed values (smol::RopeScalingRequest,
// smol::KvCacheTypes, smol::SamplerParams), never argv.
//
//   Options o;
//   smol::args::FlagTable table("usage: prog -m MODEL [options]");
//   table.add({{"-m", "--model"}, "FILE", "GGUF model file", text_value(o.model)})
//        .add(threads_flags(o.threads))
//        .add({{"-p", "--n-prompt"}, "N,...", "prompt lengths", int_list_value(o.prompts, 0, 1'000'000)})
//        .add(help_flag(o.help));
//   if (const auto status = table.parse_or_exit_status(argc, argv, o.help, "prog")) return *status;
//
// Every mistake throws UsageError, whose message names the flag, what it expected (the range
// included) and the text it found; parse_or_exit_status prints it with the usage, and the program
// exits with 2 (0 after --help).
// Adding a flag to a shared group (a sampling flag, say) is one row there: every program that
// includes the group parses it, validates it and lists it in its help.

#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "smol/smol.hpp"

namespace smol::args {

// A command-line mistake, as opposed to a failure while running (smol::Error): the programs
// answer it with their usage text and exit status 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// --- Values --------------------------------------------------------------------------------

// "an integer", "an integer >= 0", "an integer from 1 to 1024": what a flag of that range takes.
template <std::integral Int>
std::string integer_range(Int min_value, Int max_value, std::string_view items = "an integer") {
    std::string text(items);
    const bool open_below = std::is_signed_v<Int> && min_value == std::numeric_limits<Int>::min();
    const bool open_above = max_value == std::numeric_limits<Int>::max();
    if (open_below && open_above) return text;
    if (open_above) return text + " >= " + std::to_string(min_value);
    if (open_below) return text + " <= " + std::to_string(max_value);
    return text + " from " + std::to_string(min_value) + " to " + std::to_string(max_value);
}

// A decimal integer in [min_value, max_value] and nothing else: no spaces, no '+', no empty text.
// Otherwise a UsageError "FLAG: expected an integer from MIN to MAX, found 'TEXT'".
template <std::integral Int>
Int parse_integer(std::string_view flag, std::string_view text, Int min_value = std::numeric_limits<Int>::min(),
                  Int max_value = std::numeric_limits<Int>::max()) {
    Int value{};
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    // from_chars reports a value past Int as out of range instead of wrapping it into the range.
    if (text.empty() || error != std::errc() || stop != end || value < min_value || value > max_value)
        throw UsageError(std::string(flag) + ": expected " + integer_range(min_value, max_value) + ", found '" +
                         std::string(text) + "'");
    return value;
}

// A decimal number as strtod reads it ("0.5", "1e-3"), in [min_value, max_value] (NaN never is);
// the whole text must be the number. Otherwise a UsageError "FLAG: expected a number from MIN to
// MAX, found 'TEXT'" ("a number" when the range is unbounded).
template <std::floating_point Float = double>
Float parse_number(std::string_view flag, const std::string& text, Float min_value = -std::numeric_limits<Float>::infinity(),
                   Float max_value = std::numeric_limits<Float>::infinity()) {
    char* end = nullptr;
    errno = 0;
    Float value{};
    if constexpr (std::same_as<Float, float>) value = std::strtof(text.c_str(), &end);
    else value = Float(std::strtod(text.c_str(), &end));
    const bool bounded = !std::isinf(min_value) || !std::isinf(max_value);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
        (bounded && !(value >= min_value && value <= max_value))) {
        std::string expected = "a number";
        if (bounded) expected += " from " + smol::concat(min_value) + " to " + smol::concat(max_value);
        throw UsageError(std::string(flag) + ": expected " + expected + ", found '" + text + "'");
    }
    return value;
}

// The items between commas, empty ones included ("a,,b" -> {"a", "", "b"}; "" -> {""}), so a
// stray comma reaches the caller's validation instead of disappearing.
inline std::vector<std::string> split_commas(std::string_view text) {
    std::vector<std::string> items;
    std::size_t at = 0;
    while (true) {
        const std::size_t comma = text.find(',', at);
        items.emplace_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
        if (comma == std::string_view::npos) return items;
        at = comma + 1;
    }
}

// Comma-separated decimal integers in [min_value, max_value] ("512,1024"), each item as strict as
// parse_integer's text. A bad item is reported by itself, so a long list points at the culprit:
// "FLAG: expected comma-separated ITEMS from MIN to MAX, found 'ITEM' in 'TEXT'", where `items`
// says what they are ("token ids").
inline std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text, std::int64_t min_value,
                                                std::int64_t max_value, std::string_view items = "integers") {
    std::vector<std::int64_t> values;
    for (const std::string& item : split_commas(text)) {
        std::int64_t v = 0;
        const char* end = item.data() + item.size();
        const auto [stop, error] = std::from_chars(item.data(), end, v);
        if (item.empty() || error != std::errc() || stop != end || v < min_value || v > max_value)
            throw UsageError(std::string(flag) + ": expected comma-separated " + std::string(items) + " from " +
                             std::to_string(min_value) + " to " + std::to_string(max_value) + ", found '" + item +
                             "' in '" + std::string(text) + "'");
        values.push_back(v);
    }
    return values;
}

// --- The reader ----------------------------------------------------------------------------

// Walks argv one argument at a time; the value readers take the argument after the current flag
// and name that flag in their errors.
class ArgReader {
public:
    // Reads argv[first] onwards (argv[0] is the program).
    ArgReader(int argc, const char* const* argv, int first = 1) : argc_(argc), argv_(argv), next_(first) {}

    // Moves to the next argument; false when none is left.
    bool next() {
        if (next_ >= argc_) return false;
        current_ = argv_[next_++];
        return true;
    }

    // The current argument: a flag, or a positional argument.
    const std::string& arg() const { return current_; }

    // Whether the current argument is `name` or its other spelling `alias` ("-m", "--model").
    bool is(std::string_view name, std::string_view alias = {}) const {
        return current_ == name || (!alias.empty() && current_ == alias);
    }

    // Whether the current argument looks like a flag ("-x", "--xy"; a lone "-" is a file name).
    bool is_flag() const { return current_.size() > 1 && current_[0] == '-'; }

    // The argument after the current flag, which it consumes; "FLAG needs WHAT" when there is none.
    std::string value(std::string_view what = "a value") {
        if (next_ >= argc_) throw UsageError(current_ + " needs " + std::string(what));
        return argv_[next_++];
    }

    template <std::integral Int>
    Int integer(Int min_value = std::numeric_limits<Int>::min(), Int max_value = std::numeric_limits<Int>::max()) {
        const std::string flag = current_;
        return parse_integer<Int>(flag, value(), min_value, max_value);
    }

    template <std::floating_point Float = double>
    Float number(Float min_value = -std::numeric_limits<Float>::infinity(),
                 Float max_value = std::numeric_limits<Float>::infinity()) {
        const std::string flag = current_;
        return parse_number<Float>(flag, value(), min_value, max_value);
    }

    std::vector<std::int64_t> int_list(std::int64_t min_value, std::int64_t max_value, std::string_view items = "integers") {
        const std::string flag = current_;
        return parse_int_list(flag, value(), min_value, max_value, items);
    }

    std::vector<std::string> list() { return split_commas(value()); }

    // The value, which must be one of `choices`: "FLAG: expected md or json, found 'TEXT'".
    std::string choice(std::initializer_list<std::string_view> choices) {
        const std::string flag = current_;
        const std::string v = value();
        std::string expected;
        std::size_t i = 0;
        for (const std::string_view c : choices) {
            if (v == c) return v;
            expected += i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ";
            expected += c;
            ++i;
        }
        throw UsageError(flag + ": expected " + expected + ", found '" + v + "'");
    }

    // The current argument matched no flag.
    [[noreturn]] void unknown() const { throw UsageError("unknown argument '" + current_ + "'"); }

private:
    int argc_;
    const char* const* argv_;
    int next_;
    std::string current_;
};

// --- One table of flags --------------------------------------------------------------------

// What a flag's value is: how the text after the flag becomes its option, the words errors and
// the help use for what it takes, and the default the help shows.
struct FlagValue {
    // Reads the text given after `flag` into the option; a switch gets "". Throws UsageError.
    std::function<void(const std::string& flag, const std::string& text)> read;
    std::string expected;      // "an integer from 0 to 1024"; "" when any text is taken
    std::string default_text;  // the option's value before any flag; "" shows none
    bool takes_value = true;   // false: a switch
};

// One row of a program's table: every spelling, the value's placeholder, what it does, its value.
struct Flag {
    std::vector<std::string> names;  // {"-t", "--threads"}: the help lists them in this order
    std::string placeholder;         // "N" in "-t, --threads N"; "" for a switch
    std::string help;                // what it does; "[range; default: X]" is added from `value`
    FlagValue value;
};

// --- Values a row can take ---

// A switch: the flag alone sets `target` to `value`.
template <class T, class V>
FlagValue switch_value(T& target, V value) {
    return {[&target, value](const std::string&, const std::string&) { target = value; }, "", "", false};
}

inline FlagValue text_value(std::string& target) {
    return {[&target](const std::string&, const std::string& text) { target = text; }, "", target};
}

inline FlagValue text_value(std::optional<std::string>& target) {
    return {[&target](const std::string&, const std::string& text) { target = text; }, "", ""};
}

// Repeatable: each use adds its text.
inline FlagValue repeated_text_value(std::vector<std::string>& target) {
    return {[&target](const std::string&, const std::string& text) { target.push_back(text); }, "", ""};
}

// Comma-separated items, empty ones kept (split_commas).
inline FlagValue comma_list_value(std::vector<std::string>& target) {
    return {[&target](const std::string&, const std::string& text) { target = split_commas(text); }, "", ""};
}

// The text as the program's own reader takes it (a file of keys, say): `read` throws its own error.
inline FlagValue text_reader(std::function<void(const std::string& flag, const std::string& text)> read) {
    return {std::move(read), "", ""};
}

template <std::integral Int>
FlagValue integer_value(Int& target, Int min_value, Int max_value = std::numeric_limits<Int>::max()) {
    return {[&target, min_value, max_value](const std::string& flag, const std::string& text) {
                target = parse_integer<Int>(flag, text, min_value, max_value);
            },
            integer_range(min_value, max_value), std::to_string(target)};
}

template <std::floating_point Float>
FlagValue number_value(Float& target, Float min_value = -std::numeric_limits<Float>::infinity(),
                       Float max_value = std::numeric_limits<Float>::infinity()) {
    const bool bounded = !std::isinf(min_value) || !std::isinf(max_value);
    return {[&target, min_value, max_value](const std::string& flag, const std::string& text) {
                target = parse_number<Float>(flag, text, min_value, max_value);
            },
            bounded ? "a number from " + smol::concat(min_value) + " to " + smol::concat(max_value) : "a number",
            smol::concat(target)};
}

// A value that `accept` checks and stores, returning false when the text is not `expected`: the
// error then reads "FLAG: expected EXPECTED, found 'TEXT'".
inline FlagValue checked_value(std::string expected, std::string default_text, std::function<bool(const std::string&)> accept) {
    return {[expected, accept = std::move(accept)](const std::string& flag, const std::string& text) {
                if (!accept(text)) throw UsageError(flag + ": expected " + expected + ", found '" + text + "'");
            },
            expected, std::move(default_text)};
}

// Comma-separated integers in [min_value, max_value] (parse_int_list), e.g. "512,1024".
template <std::integral Int>
FlagValue int_list_value(std::vector<Int>& target, Int min_value, Int max_value, std::string items = "integers") {
    std::string defaults;
    for (const Int v : target) {
        if (!defaults.empty()) defaults += ',';
        defaults += std::to_string(v);
    }
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string&& here.
    std::string expected = "comma-separated ";
    expected.append(items).append(" from ").append(std::to_string(min_value)).append(" to ").append(std::to_string(max_value));
    return {[&target, min_value, max_value, items](const std::string& flag, const std::string& text) {
                const std::vector<std::int64_t> values = parse_int_list(flag, text, min_value, max_value, items);
                target.assign(values.begin(), values.end());
            },
            expected, defaults};
}

// One of `choices`: "FLAG: expected md or json, found 'TEXT'".
inline FlagValue choice_value(std::string& target, std::vector<std::string> choices) {
    std::string expected;
    for (std::size_t i = 0; i < choices.size(); ++i)
        expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    return checked_value(expected, target, [&target, choices](const std::string& text) {
        for (const std::string& c : choices)
            if (text == c) return target = text, true;
        return false;
    });
}

// The same value with the help's default said in words ("all cores", "the host name").
inline FlagValue with_default(FlagValue value, std::string default_text) {
    value.default_text = std::move(default_text);
    return value;
}

// --- The table ---

// A program's flags, in the order its help lists them, with headings and notes between them.
class FlagTable {
public:
    // `usage` is the help's first line ("usage: smol-cli [-m MODEL] [options]").
    explicit FlagTable(std::string usage) { lines_.push_back({kNoFlag, std::move(usage)}); }

    // A row; a name given twice in one table is a programming error.
    FlagTable& add(Flag flag) {
        for (const std::string& name : flag.names)
            if (!names_.insert(name).second) throw std::logic_error("flag " + name + " is in the table twice");
        lines_.push_back({flags_.size(), {}});
        flags_.push_back(std::move(flag));
        return *this;
    }
    FlagTable& add(std::vector<Flag> group) {
        for (Flag& flag : group) add(std::move(flag));
        return *this;
    }
    // Text the help prints as it is between rows ("\nModes:" or a paragraph), newline added.
    FlagTable& note(std::string text) {
        lines_.push_back({kNoFlag, std::move(text)});
        return *this;
    }
    // Where arguments that are not flags go; without it they are errors.
    FlagTable& positional(std::function<void(const std::string&)> read) {
        positional_ = std::move(read);
        return *this;
    }

    // The row one of whose names is `name`, or null.
    const Flag* find(std::string_view name) const {
        for (const Flag& flag : flags_)
            for (const std::string& n : flag.names)
                if (n == name) return &flag;
        return nullptr;
    }

    // Reads argv[first] onwards into the options the rows are bound to; throws UsageError.
    void parse(int argc, const char* const* argv, int first = 1) const {
        ArgReader args(argc, argv, first);
        while (args.next()) {
            const Flag* flag = args.is_flag() ? find(args.arg()) : nullptr;
            if (!flag) {
                if (args.is_flag() || !positional_) args.unknown();
                positional_(args.arg());
                continue;
            }
            const std::string name = args.arg();
            const std::string what = flag->value.expected.empty() ? "a value" : flag->value.expected;
            flag->value.read(name, flag->value.takes_value ? args.value(what) : std::string());
        }
    }

    // The start every program's main() shares: reads argv; on --help (`help`, which the table's
    // help_flag sets) writes the help to `out` and gives 0; else runs `check`, the program's own
    // rules (a required flag, flags that go together), which throw UsageError. A UsageError from
    // either (or, with Caught = std::exception, any error: for programs whose flags read files) is
    // written to `err` as "PROGRAM: message" with the help after it, and gives 2. nullopt: go on.
    template <class Caught = UsageError>
    std::optional<int> parse_or_exit_status(int argc, const char* const* argv, const bool& help, std::string_view program,
                                            const std::function<void()>& check = {}, std::FILE* out = stdout,
                                            std::FILE* err = stderr) const {
        try {
            parse(argc, argv);
            if (help) {
                std::fputs(this->help().c_str(), out);
                return 0;
            }
            if (check) check();
        } catch (const Caught& e) {
            std::fprintf(err, "%.*s: %s\n", int(program.size()), program.data(), e.what());
            std::fputs(this->help().c_str(), err);
            return 2;
        }
        return std::nullopt;
    }

    std::string help() const {
        std::string text;
        for (const Line& line : lines_)
            text += line.flag == kNoFlag ? line.text + "\n" : help_row(flags_[line.flag]);
        return text;
    }

    const std::vector<Flag>& flags() const { return flags_; }

    static constexpr std::size_t kHelpColumn = 28;  // where the help text of each row starts
    static constexpr std::size_t kHelpWidth = 104;  // lines are wrapped before this column

    // One row of the help: names and placeholder, then what it does, the range and the default.
    static std::string help_row(const Flag& flag) {
        std::string left = "  ";
        for (std::size_t i = 0; i < flag.names.size(); ++i) left += (i ? ", " : "") + flag.names[i];
        if (!flag.placeholder.empty()) left += " " + flag.placeholder;
        std::string about = flag.help;
        std::string facts = flag.value.expected;
        if (!flag.value.default_text.empty()) facts += (facts.empty() ? "default: " : "; default: ") + flag.value.default_text;
        if (!facts.empty()) about += " [" + facts + "]";
        std::string text = left;
        if (left.size() + 1 > kHelpColumn) text += "\n" + std::string(kHelpColumn, ' ');
        else text += std::string(kHelpColumn - left.size(), ' ');
        return text + wrap(about) + "\n";
    }

private:
    static constexpr std::size_t kNoFlag = std::size_t(-1);

    // `about` broken at spaces so that no line passes kHelpWidth, continuation lines indented to
    // kHelpColumn.
    static std::string wrap(const std::string& about) {
        std::string out;
        std::size_t column = kHelpColumn;
        for (const std::string& word : words(about)) {
            if (column > kHelpColumn && column + 1 + word.size() > kHelpWidth) {
                out += "\n" + std::string(kHelpColumn, ' ');
                column = kHelpColumn;
            } else if (column > kHelpColumn) {
                out += ' ';
                ++column;
            }
            out += word;
            column += word.size();
        }
        return out;
    }

    static std::vector<std::string> words(const std::string& text) {
        std::vector<std::string> out;
        std::size_t at = 0;
        while (at < text.size()) {
            const std::size_t space = text.find(' ', at);
            const std::size_t end = space == std::string::npos ? text.size() : space;
            if (end > at) out.push_back(text.substr(at, end - at));
            at = end + 1;
        }
        return out;
    }

    struct Line {
        std::size_t flag;  // index into flags_, or kNoFlag for a note
        std::string text;
    };
    std::vector<Flag> flags_;
    std::vector<Line> lines_;
    std::set<std::string, std::less<>> names_;
    std::function<void(const std::string&)> positional_;
};

// --- Flag groups the programs share: one meaning and range everywhere ----------------------

inline constexpr int kMaxThreads = 1024;
inline constexpr int kMaxContext = 1 << 20;

inline Flag help_flag(bool& help) {
    return {{"-h", "--help"}, "", "show this help and exit", switch_value(help, true)};
}

// -m: one model file. (smol-bench's -m takes a comma list of them, as llama-bench's does.)
inline Flag model_flag(std::string& model) {
    return {{"-m", "--model"}, "FILE", "GGUF model file", text_value(model)};
}

// -hf and --hf-file: a model from the Hugging Face Hub (smol/hub.hpp resolves them).
inline std::vector<Flag> hub_flags(std::string& hf_repo, std::string& hf_file) {
    return {{{"-hf", "--hf-repo"}, "REPO[:QUANT]",
             "model from the Hugging Face Hub, downloaded into the cache when missing (default quant Q4_K_M), "
             "e.g. ggml-org/SmolLM3-3B-GGUF; without -m or -hf the cached default ggml-org/SmolLM3-3B-GGUF:Q4_K_M",
             text_value(hf_repo)},
            {{"--hf-file"}, "NAME", "with -hf: the file in the repository to use", text_value(hf_file)}};
}

inline constexpr const char* kThreadsHelp =
    "CPU threads the computation runs on; 0: OpenMP's default (OMP_NUM_THREADS when set, else every core)";

// -t: the threads a program's computation runs on, passed with the work (LoadOptions::threads,
// SchedulerOptions::threads), never set process-wide.
inline Flag threads_flag(int& threads) {
    return {{"-t", "--threads"}, "N", kThreadsHelp, integer_value(threads, 0, kMaxThreads)};
}

// -t as a list, for smol-bench (llama-bench's "-t 1,2,4"): each item as -t's value.
inline Flag threads_list_flag(std::vector<int>& threads) {
    return {{"-t", "--threads"}, "N,...", kThreadsHelp, int_list_value(threads, 0, kMaxThreads)};
}

// -c: tokens of context per conversation (per slot in smol-server).
inline Flag context_flag(int& context) {
    return {{"-c", "--ctx-size"}, "N",
            "context size in tokens, per conversation (smol-server: per slot); 0: 4096; past the trained 65536 "
            "YaRN turns on (up to 131072)",
            integer_value(context, 0, kMaxContext)};
}

// RoPE scaling, llama.cpp's flags and semantics (see docs/long-contexts.md, "Contexts past 64K: YaRN").
inline std::vector<Flag> rope_scaling_flags(smol::RopeScalingRequest& request) {
    const auto scaling = [&request](const std::string& v) {
        if (v == "none") request.type = smol::RopeScaling::Type::none;
        else if (v == "yarn") request.type = smol::RopeScaling::Type::yarn;
        else return false;
        return true;
    };
    const auto factor = [&request](const std::string& v) {
        char* end = nullptr;
        const double f = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(f >= 1.0) || !std::isfinite(f)) return false;
        request.factor = f;
        return true;
    };
    return {{{"--rope-scaling"}, "none|yarn", "RoPE frequency scaling",
             checked_value("none or yarn (linear scaling is not supported)", "YaRN when -c is past the trained context",
                           scaling)},
            {{"--rope-scale"}, "F", "YaRN context factor",
             checked_value("a factor of at least 1", "context / original context", factor)},
            {{"--yarn-orig-ctx"}, "N", "YaRN: the context the model was trained at",
             with_default(integer_value(request.original_context, 1, 1 << 24), "the model's")}};
}

// KV cache types, llama.cpp's flags.
inline std::vector<Flag> kv_cache_type_flags(smol::KvCacheTypes& types) {
    const auto type_of = [](smol::KvType& target) {
        return checked_value("f16, q8_0 or q4_0", "f16", [&target](const std::string& v) {
            const std::optional<smol::KvType> type = smol::parse_kv_type(v);
            if (type) target = *type;
            return type.has_value();
        });
    };
    return {{{"-ctk", "--cache-type-k"}, "T", "KV cache type for keys", type_of(types.keys)},
            {{"-ctv", "--cache-type-v"}, "T", "KV cache type for values", type_of(types.values)}};
}

// Weight repacking, llama.cpp's flag: smol regroups the k-quant matrices for decode at load
// (smol/quant/row_groups.hpp) unless told not to.
inline Flag repack_flag(bool& repack) {
    return {{"-nr", "--no-repack"}, "",
            "keep the weights as the file lays them out: slower decode, but no copy of the Q4_K matrices in "
            "memory (the output is the same)",
            switch_value(repack, false)};
}

// Speculative decoding, llama.cpp's flags (--spec-type there; --spec here, --spec-type too). The
// pair draft-min <= draft-max is checked once all flags are read (SpeculationParams::validate).
inline std::vector<Flag> speculation_flags(smol::SpeculationParams& params) {
    const auto type = [&params](const std::string& v) {
        if (v != "none" && v != "ngram") return false;
        params.type = smol::parse_speculation_type(v);
        return true;
    };
    return {{{"--spec", "--spec-type"}, "none|ngram",
             "speculative decoding: ngram drafts the next tokens from the context (the longest earlier match of its "
             "tail) and checks them in one forward pass; the output is the same either way, only faster where the "
             "text repeats what came before; the draft length follows what drafts the model takes",
             checked_value("none or ngram", params.type == smol::SpeculationType::ngram ? "ngram" : "none", type)},
            {{"--draft-max", "--spec-draft-n-max"}, "N", "with --spec ngram: tokens drafted per step at most",
             integer_value(params.draft_max, 1, smol::SpeculationParams::kMaxDraft)},
            {{"--draft-min", "--spec-draft-n-min"}, "N", "with --spec ngram: a shorter draft is not checked",
             integer_value(params.draft_min, 0, smol::SpeculationParams::kMaxDraft)}};
}

// llama.cpp's --reasoning-budget: the thinking tokens a reply may use before the engine closes its
// think block and the answer follows.
inline Flag reasoning_budget_flag(int& budget) {
    return {{"--reasoning-budget"}, "N",
            "thinking tokens a reply may use before its think block is closed and the answer follows, for "
            "replies that give no budget of their own; -1: no limit, 0: thinking off",
            integer_value(budget, -1, smol::kMaxReasoningBudget)};
}

// A number `accept` holds to, stored in `target`: for the ranges parse_number cannot say
// (open ends, "finite").
inline FlagValue float_where(float& target, std::string expected, bool (*accept)(float)) {
    return checked_value(std::move(expected), smol::concat(target), [&target, accept](const std::string& v) {
        char* end = nullptr;
        errno = 0;
        const float f = std::strtof(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !accept(f)) return false;
        target = f;
        return true;
    });
}

// --samplers "dry;top_k;...": names (and llama.cpp's other spellings) joined by ';'.
inline std::vector<smol::SamplerStage> parse_sampler_names(const std::string& flag, std::string_view text) {
    std::vector<smol::SamplerStage> order;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = std::min(text.find(';', start), text.size());
        const std::string_view name = text.substr(start, end - start);
        const auto stage = smol::parse_sampler_stage(name, /*alternative_names=*/true);
        if (!stage)
            throw UsageError(flag + ": expected sampler names joined by ';' (dry, top_k, typ_p, top_p, min_p, xtc, "
                                    "temperature, top_n_sigma, penalties), found '" + std::string(name) + "'");
        order.push_back(*stage);
        if (order.size() > std::size_t(smol::SamplerParams::kMaxStages))
            throw UsageError(flag + ": at most " + std::to_string(smol::SamplerParams::kMaxStages) + " samplers");
        start = end + 1;
    }
    return order;
}

// --sampling-seq "edskypmxt": one letter a sampler.
inline std::vector<smol::SamplerStage> parse_sampler_letters(const std::string& flag, std::string_view text) {
    std::vector<smol::SamplerStage> order;
    for (const char letter : text) {
        const auto stage = smol::parse_sampler_stage_letter(letter);
        if (!stage)
            throw UsageError(flag + ": expected the letters e d s k y p m x t, found '" + std::string(text) + "'");
        order.push_back(*stage);
    }
    if (order.size() > std::size_t(smol::SamplerParams::kMaxStages))
        throw UsageError(flag + ": at most " + std::to_string(smol::SamplerParams::kMaxStages) + " samplers");
    return order;
}

// A flag value with llama.cpp's escapes read: \n, \t, \\, \", \'.
inline std::string unescape_flag_value(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\' || i + 1 == text.size()) {
            out += text[i];
            continue;
        }
        const char next = text[++i];
        out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
    }
    return out;
}

// Sampling, llama.cpp's flags, in the ranges smol::Sampler accepts. A new sampling flag is one
// row here: every program with sampling flags then reads, checks and lists it.
inline std::vector<Flag> sampling_flags(smol::SamplerParams& p) {
    const auto seed = [&p](const std::string& v) {
        long long s = 0;
        const auto [stop, error] = std::from_chars(v.data(), v.data() + v.size(), s);
        if (v.empty() || error != std::errc() || stop != v.data() + v.size() || s < -1) return false;
        p.seed = s == -1 ? SMOL_DEFAULT_SEED : std::uint64_t(s);
        return true;
    };
    using Limits = smol::SamplerParams;
    // --dry-sequence-breaker: the first use replaces the defaults, each later one adds.
    const auto breaker = [&p, given = std::make_shared<bool>(false)](const std::string& flag, const std::string& text) {
        const std::string value = unescape_flag_value(text);
        if (!*given) p.dry_sequence_breakers.clear();
        *given = true;
        if (value == "none") return p.dry_sequence_breakers.clear();
        if (value.empty() || value.size() > Limits::kMaxDryBreakerBytes)
            throw UsageError(flag + ": expected 1 to " + std::to_string(Limits::kMaxDryBreakerBytes) + " bytes, found '" +
                             value + "'");
        if (p.dry_sequence_breakers.size() == std::size_t(Limits::kMaxDryBreakers))
            throw UsageError(flag + ": at most " + std::to_string(Limits::kMaxDryBreakers) + " breakers");
        p.dry_sequence_breakers.push_back(value);
    };
    return {
        {{"-s", "--seed"}, "N", "sampling seed; -1: random", checked_value("-1 or an integer >= 0", "-1", seed)},
        {{"--temp"}, "T", "temperature; 0 or less: greedy",
         float_where(p.temperature, "a number", [](float f) { return !std::isnan(f); })},
        {{"--top-k"}, "N", "top-k; 0: off", integer_value(p.top_k, 0)},
        {{"--top-p"}, "P", "top-p; 1: off",
         float_where(p.top_p, "a number above 0 and at most 1", [](float f) { return f > 0 && f <= 1; })},
        {{"--min-p"}, "P", "min-p; 0: off", number_value(p.min_p, 0.0f, 1.0f)},
        {{"--repeat-penalty"}, "R", "repeat penalty; 1: off",
         float_where(p.repeat_penalty, "a finite number above 0", [](float f) { return std::isfinite(f) && f > 0; })},
        {{"--presence-penalty"}, "F", "presence penalty (OpenAI's); 0: off",
         float_where(p.presence_penalty, "a finite number", [](float f) { return std::isfinite(f); })},
        {{"--frequency-penalty"}, "F", "frequency penalty (OpenAI's); 0: off",
         float_where(p.frequency_penalty, "a finite number", [](float f) { return std::isfinite(f); })},
        {{"--repeat-last-n"}, "N", "tokens the penalties look back over; 0: off", integer_value(p.penalty_last_n, 0)},
        {{"--typical"}, "P", "locally typical sampling; 1: off", number_value(p.typical_p, 0.0f, 1.0f)},
        {{"--top-nsigma", "--top-n-sigma"}, "N", "keep logits within N standard deviations of the top; <= 0: off",
         number_value(p.top_n_sigma, -1.0f, 100.0f)},
        {{"--xtc-probability"}, "P", "XTC: how often the top choices are cut; 0: off",
         number_value(p.xtc_probability, 0.0f, 1.0f)},
        {{"--xtc-threshold"}, "P", "XTC: the probability a top choice needs; above 0.5: off",
         number_value(p.xtc_threshold, 0.0f, 1.0f)},
        {{"--dry-multiplier"}, "N", "DRY: penalty for extending a repeat; 0: off", number_value(p.dry_multiplier, 0.0f, 100.0f)},
        {{"--dry-base"}, "N", "DRY: penalty growth per repeated token past the allowed length",
         number_value(p.dry_base, 1.0f, 100.0f)},
        {{"--dry-allowed-length"}, "N", "DRY: repeats this long go unpenalised",
         integer_value(p.dry_allowed_length, 1, Limits::kMaxDryWindow)},
        {{"--dry-penalty-last-n"}, "N", "DRY: tokens looked back over; -1: " + std::to_string(Limits::kMaxDryWindow) + ", 0: off",
         integer_value(p.dry_penalty_last_n, -1, Limits::kMaxDryWindow)},
        {{"--dry-sequence-breaker"}, "S",
         "DRY: a repeat never reaches back across S (repeatable; the first replaces the defaults '\\n', ':', '\"', "
         "'*'; 'none' leaves none; \\n and \\t are read)",
         text_reader(breaker)},
        {{"--mirostat"}, "N", "0: off, 1: Mirostat, 2: Mirostat 2.0 (replaces the sampler chain)",
         integer_value(p.mirostat, 0, 2)},
        {{"--mirostat-lr"}, "N", "Mirostat learning rate eta", number_value(p.mirostat_eta, 0.0f, 10.0f)},
        {{"--mirostat-ent"}, "N", "Mirostat target entropy tau", number_value(p.mirostat_tau, 0.0f, 100.0f)},
        {{"--samplers"}, "LIST",
         "the chain's order, names joined by ';' (default penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;"
         "temperature)",
         text_reader([&p](const std::string& flag, const std::string& text) { p.samplers = parse_sampler_names(flag, text); })},
        {{"--sampling-seq", "--sampler-seq"}, "LETTERS", "the same by letters: e d s k y p m x t (default edskypmxt)",
         text_reader([&p](const std::string& flag, const std::string& text) { p.samplers = parse_sampler_letters(flag, text); })},
    };
}


}  // namespace smol::args
