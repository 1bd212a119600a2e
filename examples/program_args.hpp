#pragma once
// The programs' command lines (smol-cli, smol-server, bench/ and tools/): one reader for flags
// and their values, so every program rejects the same mistakes with the same words, plus the
// flag groups several programs share (RoPE scaling, KV cache types) with their help text. Not
// part of the library: the library takes the parsed values (smol::RopeScalingRequest,
// smol::KvCacheTypes), never argv.
//
//   smol::args::ArgReader args(argc, argv);
//   while (args.next()) {
//       if (read_rope_scaling_flag(args, rope_scaling)) continue;
//       if (args.is("-m", "--model")) model = args.value();
//       else if (args.is("-t", "--threads")) threads = args.integer<int>(1, 1024);
//       else if (args.is("-p", "--n-prompt")) prompts = args.int_list(0, 1'000'000);
//       else args.unknown();
//   }
//
// Every mistake throws UsageError, whose message names the flag, what it expected (the range
// included) and the text it found; the program prints it with its usage and exits with 2.

#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
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

// --- Flag groups several programs share ----------------------------------------------------

// RoPE scaling, llama.cpp's flags and semantics (see docs/long-contexts.md, "Contexts past 64K: YaRN").
inline constexpr const char* kRopeScalingUsage =
    "  --rope-scaling none|yarn RoPE frequency scaling (default: YaRN when -c is past the trained context)\n"
    "  --rope-scale F           YaRN context factor (default: context / original context)\n"
    "  --yarn-orig-ctx N        YaRN: the context the model was trained at (default: the model's)\n";

// Reads the current flag into `request` when it is one of the RoPE flags; false otherwise.
inline bool read_rope_scaling_flag(ArgReader& args, smol::RopeScalingRequest& request) {
    if (args.is("--rope-scaling")) {
        const std::string v = args.value();
        if (v == "none") request.type = smol::RopeScaling::Type::none;
        else if (v == "yarn") request.type = smol::RopeScaling::Type::yarn;
        else throw UsageError("--rope-scaling: expected none or yarn (linear scaling is not supported), found '" + v + "'");
    } else if (args.is("--rope-scale")) {
        const std::string v = args.value();
        char* end = nullptr;
        const double f = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(f >= 1.0) || !std::isfinite(f))
            throw UsageError("--rope-scale: expected a factor of at least 1, found '" + v + "'");
        request.factor = f;
    } else if (args.is("--yarn-orig-ctx")) {
        request.original_context = args.integer<int>(1, 1 << 24);
    } else {
        return false;
    }
    return true;
}

// KV cache types, llama.cpp's flags.
inline constexpr const char* kKvCacheTypeUsage =
    "  -ctk, --cache-type-k T   KV cache type for keys: f16 (default), q8_0, q4_0\n"
    "  -ctv, --cache-type-v T   KV cache type for values: f16 (default), q8_0, q4_0\n";

// Reads the current flag into `types` when it is -ctk or -ctv; false otherwise.
inline bool read_kv_cache_type_flag(ArgReader& args, smol::KvCacheTypes& types) {
    const bool keys = args.is("-ctk", "--cache-type-k");
    if (!keys && !args.is("-ctv", "--cache-type-v")) return false;
    const std::string v = args.value();
    const std::optional<smol::KvType> type = smol::parse_kv_type(v);
    if (!type) throw UsageError(args.arg() + ": expected f16, q8_0 or q4_0, found '" + v + "'");
    (keys ? types.keys : types.values) = *type;
    return true;
}

// Weight repacking, llama.cpp's flag: smol regroups the k-quant matrices for decode at load
// (smol/quant/row_groups.hpp) unless told not to.
inline constexpr const char* kRepackUsage =
    "  -nr, --no-repack         keep the weights as the file lays them out: slower decode, but no\n"
    "                           copy of the Q4_K matrices in memory (the output is the same)\n";

// Reads the current flag into `repack` when it is -nr; false otherwise.
inline bool read_repack_flag(ArgReader& args, bool& repack) {
    if (!args.is("-nr", "--no-repack")) return false;
    repack = false;
    return true;
}

// Speculative decoding, llama.cpp's flags (--spec-type there; --spec here, --spec-type too).
inline constexpr const char* kSpeculationUsage =
    "  --spec none|ngram        speculative decoding: ngram drafts the next tokens from the context (the\n"
    "                           longest earlier match of its tail) and checks them in one forward pass;\n"
    "                           the output is the same either way, only faster where the text repeats\n"
    "                           what came before (default: ngram in smol-cli, none in smol-server and\n"
    "                           smol-bench); the draft length follows what drafts the model takes\n"
    "  --draft-max N            tokens drafted per step at most, 1..64 (default 16)\n"
    "  --draft-min N            a shorter draft is not checked (default 1)\n";

// Reads the current flag into `params` when it is one of the speculation flags; false otherwise.
// The pair draft-min <= draft-max is checked once all flags are read (SpeculationParams::validate).
inline bool read_speculation_flag(ArgReader& args, smol::SpeculationParams& params) {
    if (args.is("--spec", "--spec-type")) {
        const std::string flag = args.arg();
        const std::string v = args.value();
        if (v != "none" && v != "ngram") throw UsageError(flag + ": expected none or ngram, found '" + v + "'");
        params.type = smol::parse_speculation_type(v);
    } else if (args.is("--draft-max", "--spec-draft-n-max")) {
        params.draft_max = args.integer<int>(1, smol::SpeculationParams::kMaxDraft);
    } else if (args.is("--draft-min", "--spec-draft-n-min")) {
        params.draft_min = args.integer<int>(0, smol::SpeculationParams::kMaxDraft);
    } else {
        return false;
    }
    return true;
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

// The samplers past top-k/top-p/min-p, llama.cpp's flags and semantics (docs/cli.md, "Sampling").
inline constexpr const char* kSamplingUsage =
    "  --typical P              locally typical sampling, 1 = off (default 1.0)\n"
    "  --top-nsigma N           keep logits within N standard deviations of the top, <= 0 = off (default -1)\n"
    "  --xtc-probability P      XTC: how often the top choices are cut, 0 = off (default 0.0)\n"
    "  --xtc-threshold P        XTC: the probability a top choice needs, > 0.5 = off (default 0.1)\n"
    "  --dry-multiplier N       DRY: penalty for extending a repeat, 0 = off (default 0.0)\n"
    "  --dry-base N             DRY: penalty growth per repeated token past the allowed length (default 1.75)\n"
    "  --dry-allowed-length N   DRY: repeats this long go unpenalised (default 2)\n"
    "  --dry-penalty-last-n N   DRY: tokens looked back over, -1 = 65536, 0 = off (default -1)\n"
    "  --dry-sequence-breaker S DRY: a repeat never reaches back across S (repeatable; the first replaces the\n"
    "                           defaults '\\n', ':', '\"', '*'; 'none' leaves none; \\n and \\t are read)\n"
    "  --mirostat N             0 = off, 1 = Mirostat, 2 = Mirostat 2.0 (replaces the sampler chain; default 0)\n"
    "  --mirostat-lr N          Mirostat learning rate eta (default 0.1)\n"
    "  --mirostat-ent N         Mirostat target entropy tau (default 5.0)\n"
    "  --samplers LIST          the chain's order, names joined by ';' (default\n"
    "                           penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)\n"
    "  --sampling-seq LETTERS   the same by letters: e d s k y p m x t (default edskypmxt)\n";

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

// Reads the current flag into `params` when it is one of kSamplingUsage's; false otherwise.
// `breakers_given` records that --dry-sequence-breaker replaced the defaults already.
inline bool read_sampling_flag(ArgReader& args, smol::SamplerParams& params, bool& breakers_given) {
    using Limits = smol::SamplerParams;
    if (args.is("--typical")) params.typical_p = args.number<float>(0.0f, 1.0f);
    else if (args.is("--top-nsigma", "--top-n-sigma")) params.top_n_sigma = args.number<float>(-1.0f, 100.0f);
    else if (args.is("--xtc-probability")) params.xtc_probability = args.number<float>(0.0f, 1.0f);
    else if (args.is("--xtc-threshold")) params.xtc_threshold = args.number<float>(0.0f, 1.0f);
    else if (args.is("--dry-multiplier")) params.dry_multiplier = args.number<float>(0.0f, 100.0f);
    else if (args.is("--dry-base")) params.dry_base = args.number<float>(1.0f, 100.0f);
    else if (args.is("--dry-allowed-length")) params.dry_allowed_length = args.integer<int>(1, Limits::kMaxDryWindow);
    else if (args.is("--dry-penalty-last-n")) params.dry_penalty_last_n = args.integer<int>(-1, Limits::kMaxDryWindow);
    else if (args.is("--dry-sequence-breaker")) {
        const std::string value = unescape_flag_value(args.value("a string"));
        if (!breakers_given) params.dry_sequence_breakers.clear();
        breakers_given = true;
        if (value == "none") params.dry_sequence_breakers.clear();
        else if (value.empty() || value.size() > Limits::kMaxDryBreakerBytes)
            throw UsageError("--dry-sequence-breaker: expected 1 to " + std::to_string(Limits::kMaxDryBreakerBytes) +
                             " bytes, found '" + value + "'");
        else if (params.dry_sequence_breakers.size() == std::size_t(Limits::kMaxDryBreakers))
            throw UsageError("--dry-sequence-breaker: at most " + std::to_string(Limits::kMaxDryBreakers) + " breakers");
        else params.dry_sequence_breakers.push_back(value);
    } else if (args.is("--mirostat")) params.mirostat = args.integer<int>(0, 2);
    else if (args.is("--mirostat-lr")) params.mirostat_eta = args.number<float>(0.0f, 10.0f);
    else if (args.is("--mirostat-ent")) params.mirostat_tau = args.number<float>(0.0f, 100.0f);
    else if (args.is("--samplers")) params.samplers = parse_sampler_names(args.arg(), args.value());
    else if (args.is("--sampling-seq", "--sampler-seq")) params.samplers = parse_sampler_letters(args.arg(), args.value());
    else return false;
    return true;
}

}  // namespace smol::args
