#pragma once
// Context-free grammars in llama.cpp's GBNF notation, and a matcher that says which bytes may
// come next. Constrained decoding (generate/grammar_constraint.hpp) walks the vocabulary with
// it to mask every token that would leave the grammar.
//
//   root   ::= "{" ws members? "}"            # rules: name ::= alternatives
//   ws     ::= [ \t\n]*                        # character classes, negated with [^...]
//   digits ::= [0-9]+ ("." [0-9]{1,3})?        # groups; * + ? {m} {m,} {m,n}
//
// The matcher is a pushdown recognizer over Unicode code points: its state is a set of stacks
// of grammar positions (each stack one way the text so far can continue), advanced one byte at
// a time with UTF-8 decoding, so a token that ends inside a character is judged by the
// characters it can still become. Left-recursive grammars are refused.
//
// Grammars come from strangers (a request's `grammar` or JSON schema), so every cost is bounded
// before it is paid (GrammarLimits): parsing, counted repetitions and the checks after them are
// linear in the grammar's size, which is capped; the matcher counts its work and the stacks it
// holds, and throws GrammarTooComplex past its budget rather than run on.

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::text {

// A set of code points: ranges, or everything outside them.
struct CharSet {
    std::vector<std::pair<char32_t, char32_t>> ranges;  // inclusive
    bool negated = false;

    bool contains(char32_t c) const {
        bool in = false;
        for (const auto& [lo, hi] : ranges) in = in || (c >= lo && c <= hi);
        return in != negated;
    }
    // Whether any code point in [lo, hi] is in the set.
    bool intersects(char32_t lo, char32_t hi) const {
        if (!negated) {
            for (const auto& [a, b] : ranges)
                if (a <= hi && b >= lo) return true;
            return false;
        }
        // Negated: some point of [lo, hi] escapes every range. Ranges are few; walk the gaps.
        char32_t next = lo;
        while (next <= hi) {
            bool moved = false;
            for (const auto& [a, b] : ranges)
                if (next >= a && next <= b) {
                    if (b >= hi) return false;
                    next = b + 1;
                    moved = true;
                }
            if (!moved) return true;
        }
        return false;
    }
};

// A grammar (or one step of matching it) past a budget: callers answer it as a client error that
// names the limit, never by running on.
class GrammarTooComplex : public Error {
public:
    using Error::Error;
};

// What one grammar may cost to compile. The defaults take every grammar llama.cpp's examples
// hold and a JSON schema string with maxLength 100000, and compile any grammar within them in
// well under a second.
struct GrammarLimits {
    std::size_t max_elements = std::size_t(1) << 20;  // after counted repetitions are expanded
    std::size_t max_rules = std::size_t(1) << 18;     // named ones and those groups and repetitions make
    int max_nesting = 128;                            // groups inside groups: ((( ... )))
};

class Grammar {
public:
    enum class Kind : std::uint8_t { chars, rule, end };
    struct Element {
        Kind kind;
        std::uint32_t value;  // chars: index into sets(); rule: rule id; end: the rule it ends
    };

    // Parses GBNF text; the start rule is `root`. Errors name the line and what was expected.
    // Throws GrammarTooComplex past `limits`.
    static Grammar parse(std::string_view text, std::string_view root = "root", const GrammarLimits& limits = {}) {
        Grammar g;
        g.limits_ = limits;
        Parser(g, text).parse_all();
        const auto it = g.rule_ids_.find(std::string(root));
        if (it == g.rule_ids_.end()) fail("grammar: no rule named '", root, "' to start from");
        g.root_ = it->second;
        for (std::uint32_t r = 0; r < g.rules_.size(); ++r)
            if (!g.defined_[r]) fail("grammar: rule '", g.names_[r], "' is used but never defined");
        const Uses uses = g.uses();
        g.check_left_recursion(uses);
        g.compute_min_rest(uses);
        return g;
    }

    std::uint32_t root() const { return root_; }
    const Element& element(std::uint32_t position) const { return elements_[position]; }
    const CharSet& set(std::uint32_t index) const { return sets_[index]; }
    // The first position of each alternative of a rule.
    const std::vector<std::uint32_t>& alternatives(std::uint32_t rule) const { return rules_[rule]; }
    const std::string& rule_name(std::uint32_t rule) const { return names_[rule]; }
    // The fewest characters that finish the alternative from `position` on (kNever: none do).
    std::uint32_t min_rest(std::uint32_t position) const { return min_rest_[position]; }
    static constexpr std::uint32_t kNever = 1u << 30;

private:
    std::vector<Element> elements_;                 // every alternative's elements, each ended by `end`
    std::vector<std::vector<std::uint32_t>> rules_;  // [rule] alternatives' first positions
    std::vector<std::string> names_;                 // [rule]
    std::vector<bool> defined_;                      // [rule]
    std::vector<CharSet> sets_;
    std::map<std::string, std::uint32_t> rule_ids_;
    std::vector<std::uint32_t> min_rest_;  // [position]
    std::uint32_t root_ = 0;
    GrammarLimits limits_;
    std::size_t elements_made_ = 0;                    // every element the parser wrote, copies included
    std::map<std::string, int, std::less<>> next_suffix_;  // fresh_rule: the next N of base#N, per base

    // Counts `n` more elements against the budget before they are written.
    void spend_elements(std::size_t n) {
        if (n > limits_.max_elements || elements_made_ + n > limits_.max_elements)
            throw GrammarTooComplex("grammar: more than " + std::to_string(limits_.max_elements) +
                                    " elements once repetitions are expanded; the limit is " +
                                    std::to_string(limits_.max_elements) + " (use * or + rather than large counts)");
        elements_made_ += n;
    }

    // Each alternative's rule, first position and counts of characters and references, and for
    // each rule the alternatives that refer to it (once per reference): the indexes the linear
    // checks after parsing walk, built once for both.
    struct Uses {
        std::vector<std::uint32_t> alt_rule;              // [alternative]
        std::vector<std::uint32_t> alt_start;             // [alternative] first position
        std::vector<std::uint32_t> alt_chars;             // [alternative] character elements
        std::vector<std::uint32_t> alt_refs;              // [alternative] rule references
        std::vector<std::vector<std::uint32_t>> used_in;  // [rule] alternatives, once per reference
    };
    Uses uses() const {
        Uses u;
        u.used_in.resize(rules_.size());
        for (std::uint32_t r = 0; r < rules_.size(); ++r)
            for (std::uint32_t start : rules_[r]) {
                const auto alt = std::uint32_t(u.alt_rule.size());
                u.alt_rule.push_back(r);
                u.alt_start.push_back(start);
                u.alt_chars.push_back(0);
                u.alt_refs.push_back(0);
                for (std::uint32_t p = start; elements_[p].kind != Kind::end; ++p) {
                    if (elements_[p].kind == Kind::chars) {
                        ++u.alt_chars[alt];
                    } else {
                        ++u.alt_refs[alt];
                        u.used_in[elements_[p].value].push_back(alt);
                    }
                }
            }
        return u;
    }

    // The fewest characters each rule can match, by Knuth's generalisation of Dijkstra's
    // algorithm: a rule is settled at the smallest total among its alternatives whose rules are
    // all settled, smallest first. O(elements log rules), where iterating to a fixed point is
    // quadratic on the chains that counted repetitions make.
    void compute_min_rest(const Uses& u) {
        const std::size_t n_alts = u.alt_rule.size();
        // Characters, and settled rules' minimums so far; references not yet settled.
        std::vector<std::uint64_t> total(u.alt_chars.begin(), u.alt_chars.end());
        std::vector<std::uint32_t> unsettled = u.alt_refs;
        using Candidate = std::pair<std::uint64_t, std::uint32_t>;  // (characters, rule)
        std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> ready;
        for (std::size_t a = 0; a < n_alts; ++a)
            if (unsettled[a] == 0) ready.push({total[a], u.alt_rule[a]});
        std::vector<std::uint32_t> rule_min(rules_.size(), kNever);
        std::vector<bool> settled(rules_.size(), false);
        while (!ready.empty()) {
            const auto [chars, rule] = ready.top();
            ready.pop();
            if (settled[rule]) continue;
            settled[rule] = true;
            rule_min[rule] = std::uint32_t(std::min<std::uint64_t>(chars, kNever));
            for (std::uint32_t a : u.used_in[rule]) {
                total[a] += rule_min[rule];
                if (--unsettled[a] == 0) ready.push({total[a], u.alt_rule[a]});
            }
        }
        // Each alternative from its end backwards.
        min_rest_.assign(elements_.size(), kNever);
        for (std::size_t a = 0; a < n_alts; ++a) {
            std::uint32_t end = u.alt_start[a];
            while (elements_[end].kind != Kind::end) ++end;
            std::uint64_t rest = 0;
            min_rest_[end] = 0;
            for (std::uint32_t p = end; p-- > u.alt_start[a];) {
                const Element& e = elements_[p];
                rest = std::min<std::uint64_t>(kNever, rest + (e.kind == Kind::chars ? 1 : rule_min[e.value]));
                min_rest_[p] = std::uint32_t(rest);
            }
        }
    }

    // A rule's id, creating it (undefined) at first mention.
    std::uint32_t rule_id(const std::string& name) {
        const auto [it, added] = rule_ids_.emplace(name, std::uint32_t(rules_.size()));
        if (added) {
            if (rules_.size() >= limits_.max_rules)
                throw GrammarTooComplex("grammar: more than " + std::to_string(limits_.max_rules) +
                                        " rules (groups and repetitions count as rules); the limit is " +
                                        std::to_string(limits_.max_rules));
            rules_.emplace_back();
            names_.push_back(name);
            defined_.push_back(false);
        }
        return it->second;
    }
    // A new rule for a group or repetition inside rule `base`, named base#N: '#' cannot be in
    // a rule name the grammar writes, so the names never collide with the grammar's own (a
    // grammar could not name a rule root-0 and also use a group in root), and N counts on per
    // base, so naming the n-th costs one lookup, not n.
    std::uint32_t fresh_rule(const std::string& base) {
        return rule_id(base + "#" + std::to_string(next_suffix_[base]++));
    }

    // One alternative under construction: its elements before being laid out.
    using Sequence = std::vector<Element>;

    void define(std::uint32_t rule, const std::vector<Sequence>& alternatives) {
        if (defined_[rule]) fail("grammar: rule '", names_[rule], "' is defined twice");
        spend_elements(alternatives.size());  // their ends
        defined_[rule] = true;
        for (const Sequence& seq : alternatives) {
            rules_[rule].push_back(std::uint32_t(elements_.size()));
            elements_.insert(elements_.end(), seq.begin(), seq.end());
            elements_.push_back({Kind::end, rule});
        }
    }

    // A rule is left-recursive when it can reach itself without consuming a character; the
    // matcher would expand it forever. Found as a cycle in the graph of "rule r can start with
    // rule s" (each alternative's leading references up to the first that cannot match empty),
    // by one depth-first search: linear in the grammar, where trying every rule as a start is
    // quadratic.
    void check_left_recursion(const Uses& u) const {
        // Nullable rules, by counting down each alternative's references to rules not yet
        // known nullable (an alternative with a character never is).
        std::vector<bool> nullable(rules_.size(), false);
        std::vector<std::uint32_t> waiting = u.alt_refs;
        std::vector<std::uint32_t> todo;
        const auto make_nullable = [&](std::uint32_t r) {
            if (!nullable[r]) {
                nullable[r] = true;
                todo.push_back(r);
            }
        };
        for (std::size_t a = 0; a < u.alt_rule.size(); ++a)
            if (u.alt_chars[a] == 0 && waiting[a] == 0) make_nullable(u.alt_rule[a]);
        while (!todo.empty()) {
            const std::uint32_t r = todo.back();
            todo.pop_back();
            for (std::uint32_t a : u.used_in[r])
                if (--waiting[a] == 0 && u.alt_chars[a] == 0) make_nullable(u.alt_rule[a]);
        }
        // Depth-first search with an explicit stack; a reference back to a rule still on the
        // stack closes a cycle through it.
        enum : std::uint8_t { unseen, on_path, done };
        std::vector<std::uint8_t> mark(rules_.size(), unseen);
        struct Frame {
            std::uint32_t rule;
            std::size_t alt;       // index into rules_[rule]
            std::uint32_t position;  // next element of that alternative to look at
        };
        std::vector<Frame> path;
        for (std::uint32_t start = 0; start < rules_.size(); ++start) {
            if (mark[start] != unseen) continue;
            mark[start] = on_path;
            path.push_back({start, 0, rules_[start].empty() ? 0 : rules_[start][0]});
            while (!path.empty()) {
                Frame& f = path.back();
                if (f.alt >= rules_[f.rule].size()) {
                    mark[f.rule] = done;
                    path.pop_back();
                    continue;
                }
                const Element& e = elements_[f.position];
                if (e.kind != Kind::rule) {  // a character or the end: no more leading references
                    if (++f.alt < rules_[f.rule].size()) f.position = rules_[f.rule][f.alt];
                    continue;
                }
                const std::uint32_t next = e.value;
                // After a reference that may match empty, the next element leads too.
                if (nullable[next]) ++f.position;
                else if (++f.alt < rules_[f.rule].size()) f.position = rules_[f.rule][f.alt];
                if (mark[next] == on_path) fail("grammar: rule '", names_[next], "' is left-recursive");
                if (mark[next] == unseen) {
                    mark[next] = on_path;
                    path.push_back({next, 0, rules_[next].empty() ? 0 : rules_[next][0]});
                }
            }
        }
    }

    class Parser {
    public:
        Parser(Grammar& g, std::string_view text) : g_(g), text_(text) {}

        void parse_all() {
            skip_space(true);
            while (pos_ < text_.size()) {
                const std::string name = parse_name();
                skip_space(false);
                if (text_.substr(pos_, 3) != "::=") error("'::=' after the rule name '" + name + "'");
                pos_ += 3;
                const std::uint32_t rule = g_.rule_id(name);
                std::vector<Sequence> alternatives = parse_alternatives(name, false);
                g_.define(rule, alternatives);
                skip_space(true);
            }
            if (g_.rules_.empty()) fail("grammar: no rules");
        }

    private:
        Grammar& g_;
        std::string_view text_;
        std::size_t pos_ = 0;
        int nesting_ = 0;  // groups open around pos_

        [[noreturn]] void error(const std::string& expected) const {
            const std::size_t line = 1 + std::size_t(std::count(text_.begin(), text_.begin() + long(pos_), '\n'));
            const std::string_view rest = text_.substr(pos_, 20);
            if (rest.empty()) fail("grammar: line ", line, ": expected ", expected, ", found the end");
            fail("grammar: line ", line, ": expected ", expected, ", found '", rest.substr(0, rest.find('\n')), "'");
        }

        // Spaces and comments; newlines too where `newlines` (between rules, inside groups).
        void skip_space(bool newlines) {
            while (pos_ < text_.size()) {
                const char c = text_[pos_];
                if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
                    ++pos_;
                } else if (c == '#') {
                    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
                } else if (!newlines && c == '\n') {
                    // A line that continues the rule starts with '|'.
                    std::size_t next = pos_ + 1;
                    while (next < text_.size() && (text_[next] == ' ' || text_[next] == '\t' || text_[next] == '\r'))
                        ++next;
                    if (next < text_.size() && text_[next] == '|') pos_ = next;
                    else return;
                } else {
                    return;
                }
            }
        }

        static bool name_char(char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        }

        std::string parse_name() {
            const std::size_t start = pos_;
            while (pos_ < text_.size() && name_char(text_[pos_])) ++pos_;
            if (pos_ == start) error("a rule name");
            return std::string(text_.substr(start, pos_ - start));
        }

        std::vector<Sequence> parse_alternatives(const std::string& rule, bool nested) {
            std::vector<Sequence> alternatives{parse_sequence(rule, nested)};
            while (true) {
                skip_space(nested);
                if (pos_ >= text_.size() || text_[pos_] != '|') break;
                ++pos_;
                alternatives.push_back(parse_sequence(rule, nested));
            }
            return alternatives;
        }

        Sequence parse_sequence(const std::string& rule, bool nested) {
            Sequence seq;
            while (true) {
                skip_space(nested);
                if (pos_ >= text_.size()) break;
                const char c = text_[pos_];
                if (c == '|' || c == ')' || c == '\n') break;
                const std::size_t item_start = seq.size();
                if (c == '"') {
                    ++pos_;
                    while (pos_ < text_.size() && text_[pos_] != '"') {
                        const char32_t cp = parse_char();
                        seq.push_back({Kind::chars, add_set({{{cp, cp}}, false})});
                    }
                    if (pos_ >= text_.size()) error("a closing '\"'");
                    ++pos_;
                } else if (c == '[') {
                    ++pos_;
                    CharSet set;
                    if (pos_ < text_.size() && text_[pos_] == '^') {
                        set.negated = true;
                        ++pos_;
                    }
                    while (pos_ < text_.size() && text_[pos_] != ']') {
                        const char32_t lo = parse_char();
                        char32_t hi = lo;
                        if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
                            ++pos_;
                            hi = parse_char();
                        }
                        if (hi < lo) error("a range from low to high");
                        set.ranges.push_back({lo, hi});
                    }
                    if (pos_ >= text_.size()) error("a closing ']'");
                    ++pos_;
                    seq.push_back({Kind::chars, add_set(std::move(set))});
                } else if (c == '(') {
                    if (++nesting_ > g_.limits_.max_nesting)
                        throw GrammarTooComplex("grammar: groups nest more than " + std::to_string(g_.limits_.max_nesting) +
                                                " deep; the limit is " + std::to_string(g_.limits_.max_nesting));
                    ++pos_;
                    std::vector<Sequence> inner = parse_alternatives(rule, true);
                    --nesting_;
                    skip_space(true);
                    if (pos_ >= text_.size() || text_[pos_] != ')') error("a closing ')'");
                    ++pos_;
                    const std::uint32_t group = g_.fresh_rule(rule);
                    g_.define(group, inner);
                    seq.push_back({Kind::rule, group});
                } else if (c == '.') {
                    ++pos_;
                    seq.push_back({Kind::chars, add_set({{}, true})});
                } else if (name_char(c)) {
                    seq.push_back({Kind::rule, g_.rule_id(parse_name())});
                } else {
                    error("a literal, a character class, a group or a rule name");
                }
                g_.spend_elements(seq.size() - item_start);
                parse_repetition(rule, seq, item_start);
            }
            return seq;
        }

        // *, +, ?, {m}, {m,}, {m,n} after the item that starts at seq[item_start].
        void parse_repetition(const std::string& rule, Sequence& seq, std::size_t item_start) {
            if (pos_ >= text_.size()) return;
            const char c = text_[pos_];
            if (c != '*' && c != '+' && c != '?' && c != '{') return;
            ++pos_;
            int min = 0, max = -1;  // max < 0: unbounded
            if (c == '+') min = 1;
            if (c == '?') max = 1;
            if (c == '{') {
                min = parse_count();
                max = min;
                if (pos_ < text_.size() && text_[pos_] == ',') {
                    ++pos_;
                    max = pos_ < text_.size() && text_[pos_] == '}' ? -1 : parse_count();
                }
                if (pos_ >= text_.size() || text_[pos_] != '}') error("'}' closing a repetition");
                ++pos_;
                if (max >= 0 && max < min) error("a repetition {m,n} with m <= n");
            }
            const Sequence item(seq.begin() + long(item_start), seq.end());
            // The copies' cost, before any is made: {m} writes the item m times (it was
            // counted once already), and each optional one past m a rule of item + reference.
            const std::size_t optional = max < 0 ? 1 : std::size_t(max - min);
            g_.spend_elements(std::size_t(std::max(min - 1, 0)) * item.size() + optional * (item.size() + 1));
            seq.resize(item_start);
            for (int i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
            if (max < 0) {
                // tail ::= item tail | (empty)
                const std::uint32_t tail = g_.fresh_rule(rule);
                Sequence again = item;
                again.push_back({Kind::rule, tail});
                g_.define(tail, {again, {}});
                seq.push_back({Kind::rule, tail});
            } else {
                // Up to (max - min) more, nested: opt_k ::= item opt_{k-1} | (empty).
                std::uint32_t inner = 0;
                bool have_inner = false;
                for (int i = 0; i < max - min; ++i) {
                    const std::uint32_t opt = g_.fresh_rule(rule);
                    Sequence body = item;
                    if (have_inner) body.push_back({Kind::rule, inner});
                    g_.define(opt, {body, {}});
                    inner = opt;
                    have_inner = true;
                }
                if (have_inner) seq.push_back({Kind::rule, inner});
            }
        }

        int parse_count() {
            const std::size_t start = pos_;
            long value = 0;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
                value = value * 10 + (text_[pos_] - '0');
                if (value > 100000) error("a repetition count below 100000");
                ++pos_;
            }
            if (pos_ == start) error("a repetition count");
            return int(value);
        }

        // One character of a literal or class: UTF-8, or an escape.
        char32_t parse_char() {
            if (pos_ >= text_.size()) error("a character");
            const auto byte = static_cast<unsigned char>(text_[pos_]);
            if (byte == '\\') {
                if (++pos_ >= text_.size()) error("an escaped character");
                const char e = text_[pos_++];
                switch (e) {
                    case 'n': return '\n';
                    case 't': return '\t';
                    case 'r': return '\r';
                    case 'x': return parse_hex(2);
                    case 'u': return parse_hex(4);
                    case 'U': return parse_hex(8);
                    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return char32_t(e);
                    default: --pos_; error("a known escape (\\n \\t \\r \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH)");
                }
            }
            const int length = byte < 0x80 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4;
            if (pos_ + std::size_t(length) > text_.size()) error("a whole UTF-8 character");
            char32_t cp = length == 1 ? byte : byte & (0x3F >> (length - 1));
            for (int i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_ + std::size_t(i)]) & 0x3F);
            pos_ += std::size_t(length);
            return cp;
        }

        char32_t parse_hex(int digits) {
            char32_t value = 0;
            for (int i = 0; i < digits; ++i, ++pos_) {
                if (pos_ >= text_.size()) error(std::to_string(digits) + " hex digits");
                const char c = text_[pos_];
                const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0) error(std::to_string(digits) + " hex digits");
                value = value * 16 + char32_t(d);
            }
            return value;
        }

        std::uint32_t add_set(CharSet set) {
            g_.sets_.push_back(std::move(set));
            return std::uint32_t(g_.sets_.size() - 1);
        }
    };
};

// Where a grammar can be after some text: a set of stacks of positions, plus a character
// still being decoded. Stacks are persistent lists in the matcher's arena, so advancing one
// byte copies only the tops.
struct GrammarState {
    std::vector<std::int32_t> stacks;  // top nodes; kAccepted: a stack that finished the root rule
    char32_t partial = 0;              // bits of a character still missing continuation bytes
    std::uint8_t missing = 0;          // continuation bytes still expected
    std::uint8_t length = 0;           // bytes of that character

    static constexpr std::int32_t kAccepted = -1;
    bool dead() const { return stacks.empty(); }
};

class GrammarMatcher {
public:
    explicit GrammarMatcher(const Grammar& grammar) : g_(&grammar) {}

    // Work: one unit per stack node made or compared. An ambiguous grammar can make the stacks
    // multiply with each character (x ::= "a" x "b" | "a" x "c" | ...), or one reference
    // branch into exponentially many (a ::= b | b; b ::= c | c; ...), so callers give each
    // operation a budget: past it, or past max_stacks ways to continue, the matcher throws
    // GrammarTooComplex. The budget counts down until the next set_budget(); a new matcher has
    // none (its owner knows what one operation is: constrained decoding gives each token's
    // vocabulary walk its own).
    static constexpr std::size_t kMaxStacks = 1024;
    void set_budget(std::uint64_t work) { budget_ = budget_given_ = work; }
    std::uint64_t budget_left() const { return budget_; }

    // The state before any text.
    GrammarState start() {
        GrammarState s;
        expand_rule(g_->root(), GrammarState::kAccepted, s.stacks);
        dedupe(s.stacks);
        return s;
    }

    // Whether the text so far is a whole sentence of the grammar (it may also continue).
    bool accepting(const GrammarState& s) const {
        if (s.missing) return false;
        return std::find(s.stacks.begin(), s.stacks.end(), GrammarState::kAccepted) != s.stacks.end();
    }

    // Advances by one byte; false (state untouched) when no stack can take it.
    bool step(GrammarState& s, std::uint8_t byte) {
        if (s.missing == 0) {
            if (byte < 0x80) return step_char(s, byte);
            int length = 0;
            if (byte >= 0xC2 && byte <= 0xDF) length = 2;
            else if (byte >= 0xE0 && byte <= 0xEF) length = 3;
            else if (byte >= 0xF0 && byte <= 0xF4) length = 4;
            if (length == 0) return false;  // a continuation byte or an invalid lead
            const char32_t bits = byte & (0x7F >> length);
            const char32_t lo = std::max<char32_t>(bits << (6 * (length - 1)), min_code_point(length));
            if (!keep_stacks_taking(s, lo, ((bits + 1) << (6 * (length - 1))) - 1)) return false;
            s.partial = bits;
            s.missing = std::uint8_t(length - 1);
            s.length = std::uint8_t(length);
            return true;
        }
        if ((byte & 0xC0) != 0x80) return false;
        const char32_t bits = (s.partial << 6) | (byte & 0x3F);
        const int left = s.missing - 1;
        if (left > 0) {
            const char32_t lo = std::max<char32_t>(bits << (6 * left), min_code_point(s.length));
            const char32_t hi = ((bits + 1) << (6 * left)) - 1;
            if (!keep_stacks_taking(s, lo, hi)) return false;
            s.partial = bits;
            s.missing = std::uint8_t(left);
            return true;
        }
        // Overlong forms, surrogates and code points past U+10FFFF are not characters.
        if (bits < min_code_point(s.length) || (bits >= 0xD800 && bits <= 0xDFFF) || bits > 0x10FFFF) return false;
        GrammarState next = s;
        next.missing = 0;
        next.partial = 0;
        if (!step_char(next, bits)) return false;
        s = std::move(next);
        return true;
    }

    // The fewest characters that complete the text so far into a sentence (0 when it is one).
    std::uint32_t chars_to_finish(const GrammarState& s) const {
        std::uint32_t best = Grammar::kNever;
        for (std::int32_t top : s.stacks) {
            std::uint32_t total = 0;
            for (std::int32_t n = top; n >= 0 && total < Grammar::kNever; n = nodes_[std::size_t(n)].parent)
                total = std::min(Grammar::kNever, total + g_->min_rest(nodes_[std::size_t(n)].position));
            best = std::min(best, total);
        }
        return best;
    }

    // Arena bookkeeping for callers that explore and backtrack (the vocabulary walk): nodes
    // made after mark() are dropped by rewind(), so states made since must be dropped too.
    std::size_t mark() const { return nodes_.size(); }
    void rewind(std::size_t mark) { nodes_.resize(mark); }

    // Copies a state's stacks into a fresh arena (after a token is taken, so the arena does not
    // grow with the length of the text). Stacks can be as deep as the text is long (nested
    // brackets), so this walks them with a loop, not recursion.
    void compact(GrammarState& s) {
        std::vector<Node> old = std::move(nodes_);
        nodes_.clear();
        std::map<std::int32_t, std::int32_t> moved;
        std::vector<std::int32_t> chain;  // a stack's nodes from its top down to one already moved
        for (std::int32_t& top : s.stacks) {
            chain.clear();
            for (std::int32_t n = top; n >= 0 && !moved.count(n); n = old[std::size_t(n)].parent) chain.push_back(n);
            for (std::size_t i = chain.size(); i-- > 0;) {  // bottom first, so each parent exists
                const std::int32_t parent = old[std::size_t(chain[i])].parent;
                nodes_.push_back({old[std::size_t(chain[i])].position, parent < 0 ? parent : moved.at(parent)});
                moved[chain[i]] = std::int32_t(nodes_.size() - 1);
            }
            if (top >= 0) top = moved.at(top);
        }
    }

    // A stable description of a state (its stacks' positions and the pending character), equal
    // for states that accept the same continuations: the key of the mask cache.
    std::string signature(const GrammarState& s) const {
        std::string key;
        const auto put = [&](std::uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
        put(s.partial);
        put(std::uint32_t(s.missing) | std::uint32_t(s.length) << 8);
        std::vector<std::string> stacks;
        for (std::int32_t top : s.stacks) {
            std::string one;
            for (std::int32_t n = top; n >= 0; n = nodes_[std::size_t(n)].parent) {
                const std::uint32_t p = nodes_[std::size_t(n)].position;
                one.append(reinterpret_cast<const char*>(&p), sizeof p);
            }
            one.push_back(top == GrammarState::kAccepted ? 'A' : 'S');
            stacks.push_back(std::move(one));
        }
        std::sort(stacks.begin(), stacks.end());
        for (const std::string& one : stacks) {
            put(std::uint32_t(one.size()));
            key += one;
        }
        return key;
    }

private:
    struct Node {
        std::uint32_t position;  // an element of kind chars: what this stack matches next
        std::int32_t parent;     // the node below (where to return), or kAccepted
    };
    const Grammar* g_;
    std::vector<Node> nodes_;
    std::vector<std::int32_t> scratch_;
    std::uint64_t budget_ = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t budget_given_ = budget_;

    void spend(std::uint64_t work) {
        if (work > budget_)
            throw GrammarTooComplex("grammar: matching needed more than its budget of " + std::to_string(budget_given_) +
                                    " units of work; the grammar is too ambiguous (alternatives that overlap for long "
                                    "stretches, or branch without consuming text)");
        budget_ -= work;
    }

    // Guards against grammars that nest without consuming (left recursion is refused at parse
    // time; this bounds what remains, such as deep chains of empty rules).
    static constexpr int kMaxExpansion = 10000;

    // Pushes the stacks that continue at `position` with `below` underneath, resolving rule
    // references and rule ends until each top is a character class (or the stack is accepted).
    void expand(std::uint32_t position, std::int32_t below, std::vector<std::int32_t>& out, int depth = 0) {
        if (depth > kMaxExpansion)
            throw GrammarTooComplex("grammar: expansion too deep (a rule nests more than " + std::to_string(kMaxExpansion) +
                                    " times without consuming text)");
        spend(1);
        const Grammar::Element& e = g_->element(position);
        switch (e.kind) {
            case Grammar::Kind::chars:
                nodes_.push_back({position, below});
                out.push_back(std::int32_t(nodes_.size() - 1));
                return;
            case Grammar::Kind::rule: {
                // Continue after the reference once the rule is done: a return node, unless the
                // reference ends its alternative (a tail call, as every repetition makes), where
                // the rule returns straight to `below` and stacks do not grow with the text.
                std::int32_t ret = below;
                if (g_->element(position + 1).kind != Grammar::Kind::end) {
                    nodes_.push_back({position + 1, below});
                    ret = std::int32_t(nodes_.size() - 1);
                }
                for (std::uint32_t alt : g_->alternatives(e.value)) expand(alt, ret, out, depth + 1);
                return;
            }
            case Grammar::Kind::end:
                if (below == GrammarState::kAccepted) {
                    out.push_back(GrammarState::kAccepted);
                    return;
                }
                expand(nodes_[std::size_t(below)].position, nodes_[std::size_t(below)].parent, out, depth + 1);
                return;
        }
    }

    void expand_rule(std::uint32_t rule, std::int32_t below, std::vector<std::int32_t>& out) {
        for (std::uint32_t alt : g_->alternatives(rule)) expand(alt, below, out);
    }

    // The smallest code point a UTF-8 sequence of this length may encode (shorter is overlong).
    static char32_t min_code_point(int length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

    // Keeps the stacks whose next class holds a character in [lo, hi], the code points a partial
    // UTF-8 sequence can still become (those past U+10FFFF and surrogates are none); false,
    // with the state untouched, when none does.
    bool keep_stacks_taking(GrammarState& s, char32_t lo, char32_t hi) {
        hi = std::min<char32_t>(hi, 0x10FFFF);
        if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
        scratch_.clear();
        for (std::int32_t top : s.stacks)
            if (top >= 0 && g_->set(g_->element(nodes_[std::size_t(top)].position).value).intersects(lo, hi))
                scratch_.push_back(top);
        if (scratch_.empty()) return false;
        s.stacks.swap(scratch_);
        return true;
    }

    bool step_char(GrammarState& s, char32_t c) {
        scratch_.clear();  // reused: the vocabulary walk steps hundreds of thousands of times
        for (std::int32_t top : s.stacks) {
            if (top < 0) continue;
            const Node node = nodes_[std::size_t(top)];
            if (g_->set(g_->element(node.position).value).contains(c)) expand(node.position + 1, node.parent, scratch_);
        }
        if (scratch_.empty()) return false;
        dedupe(scratch_);
        s.stacks.swap(scratch_);
        return true;
    }

    // Drops stacks equal to an earlier one (same positions all the way down), so ambiguous
    // grammars do not multiply them.
    // Past kMaxStacks distinct ones it throws: the grammar is too ambiguous to follow.
    void dedupe(std::vector<std::int32_t>& stacks) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < stacks.size(); ++i) {
            bool seen = false;
            for (std::size_t j = 0; j < kept && !seen; ++j) seen = same(stacks[i], stacks[j]);
            if (seen) continue;
            if (kept == kMaxStacks)
                throw GrammarTooComplex("grammar: more than " + std::to_string(kMaxStacks) +
                                        " ways to continue the text at once; the grammar is too ambiguous");
            stacks[kept++] = stacks[i];
        }
        stacks.resize(kept);
    }

    bool same(std::int32_t a, std::int32_t b) {
        while (a >= 0 && b >= 0) {
            spend(1);
            if (a == b) return true;
            if (nodes_[std::size_t(a)].position != nodes_[std::size_t(b)].position) return false;
            a = nodes_[std::size_t(a)].parent;
            b = nodes_[std::size_t(b)].parent;
        }
        return a == b;
    }
};

namespace grammar_text_detail {
// The characters of several texts one after another, built at compile time, so that a grammar's
// text with shared rules inside it stays one constant.
template <const std::string_view&... Parts>
inline constexpr auto kJoinedChars = [] {
    std::array<char, (Parts.size() + ...)> out{};
    std::size_t at = 0;
    for (std::string_view part : {Parts...})
        for (char c : part) out[at++] = c;
    return out;
}();
template <const std::string_view&... Parts>
inline constexpr std::string_view joined{kJoinedChars<Parts...>.data(), kJoinedChars<Parts...>.size()};

inline constexpr std::string_view kOptionalBegin = " ( ", kOptionalEnd = " )?", kLineEnd = "\n";
}  // namespace grammar_text_detail

// The parts of a JSON number that every JSON parser reads as a finite double: at most 16 digits
// before the point and 16 after, an exponent of at most two digits (|x| < 1e115). RFC 8259's
// number has no bounds, and a model writes what it is allowed to: "4158E10797..." is
// grammatical, yet C++ parsers such as nlohmann::json refuse it (number overflow) and Python
// reads it as inf. The schema compiler (json_schema.hpp) builds its bounded numbers from them.
inline constexpr std::string_view kJsonIntegerRule = R"gbnf("-"? ( "0" | [1-9] [0-9]{0,15} ))gbnf";
inline constexpr std::string_view kJsonFractionRule = R"gbnf("." [0-9]{1,16})gbnf";
inline constexpr std::string_view kJsonExponentRule = R"gbnf([eE] [-+]? [0-9]{1,2})gbnf";
// integer ( fraction )? ( exponent )?
inline constexpr std::string_view kJsonNumberRule =
    grammar_text_detail::joined<kJsonIntegerRule, grammar_text_detail::kOptionalBegin, kJsonFractionRule,
                                grammar_text_detail::kOptionalEnd, grammar_text_detail::kOptionalBegin,
                                kJsonExponentRule, grammar_text_detail::kOptionalEnd>;

namespace grammar_text_detail {
inline constexpr std::string_view kJsonObjectRules = R"gbnf(
root    ::= object
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
ws      ::= [ \t\n]{0,8}
number  ::= )gbnf";
}  // namespace grammar_text_detail

// A JSON object (RFC 8259's grammar, whitespace limited to a short run so that a weak model
// cannot spend its tokens on it, numbers as kJsonNumberRule): what response_format
// {"type": "json_object"} asks for.
inline constexpr std::string_view kJsonObjectGrammar =
    grammar_text_detail::joined<grammar_text_detail::kJsonObjectRules, kJsonNumberRule, grammar_text_detail::kLineEnd>;

}  // namespace smol::text
