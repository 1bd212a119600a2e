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

#include <algorithm>
#include <cstdint>
#include <map>
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

class Grammar {
public:
    enum class Kind : std::uint8_t { chars, rule, end };
    struct Element {
        Kind kind;
        std::uint32_t value;  // chars: index into sets(); rule: rule id; end: the rule it ends
    };

    // Parses GBNF text; the start rule is `root`. Errors name the line and what was expected.
    static Grammar parse(std::string_view text, std::string_view root = "root") {
        Grammar g;
        Parser(g, text).parse_all();
        const auto it = g.rule_ids_.find(std::string(root));
        if (it == g.rule_ids_.end()) fail("grammar: no rule named '", root, "' to start from");
        g.root_ = it->second;
        for (std::uint32_t r = 0; r < g.rules_.size(); ++r)
            if (!g.defined_[r]) fail("grammar: rule '", g.names_[r], "' is used but never defined");
        g.check_left_recursion();
        g.compute_min_rest();
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

    void compute_min_rest() {
        std::vector<std::uint32_t> rule_min(rules_.size(), kNever);
        min_rest_.assign(elements_.size(), kNever);
        for (bool changed = true; changed;) {
            changed = false;
            for (std::size_t p = elements_.size(); p-- > 0;) {
                const Element& e = elements_[p];
                std::uint32_t v = 0;
                if (e.kind != Kind::end)
                    v = std::min(kNever, (e.kind == Kind::chars ? 1 : rule_min[e.value]) + min_rest_[p + 1]);
                if (v < min_rest_[p]) {
                    min_rest_[p] = v;
                    changed = true;
                }
            }
            for (std::size_t r = 0; r < rules_.size(); ++r)
                for (std::uint32_t alt : rules_[r])
                    if (min_rest_[alt] < rule_min[r]) {
                        rule_min[r] = min_rest_[alt];
                        changed = true;
                    }
        }
    }

    // A rule's id, creating it (undefined) at first mention.
    std::uint32_t rule_id(const std::string& name) {
        const auto [it, added] = rule_ids_.emplace(name, std::uint32_t(rules_.size()));
        if (added) {
            rules_.emplace_back();
            names_.push_back(name);
            defined_.push_back(false);
        }
        return it->second;
    }
    std::uint32_t fresh_rule(const std::string& base) {
        for (int i = 0;; ++i) {
            const std::string name = base + "-" + std::to_string(i);
            if (!rule_ids_.count(name)) return rule_id(name);
        }
    }

    // One alternative under construction: its elements before being laid out.
    using Sequence = std::vector<Element>;

    void define(std::uint32_t rule, const std::vector<Sequence>& alternatives) {
        if (defined_[rule]) fail("grammar: rule '", names_[rule], "' is defined twice");
        defined_[rule] = true;
        for (const Sequence& seq : alternatives) {
            rules_[rule].push_back(std::uint32_t(elements_.size()));
            elements_.insert(elements_.end(), seq.begin(), seq.end());
            elements_.push_back({Kind::end, rule});
        }
    }

    // A rule is left-recursive when it can reach itself without consuming a character; the
    // matcher would expand it forever.
    void check_left_recursion() const {
        std::vector<bool> nullable(rules_.size(), false);
        for (bool changed = true; changed;) {
            changed = false;
            for (std::uint32_t r = 0; r < rules_.size(); ++r) {
                if (nullable[r]) continue;
                for (std::uint32_t p : rules_[r]) {
                    while (elements_[p].kind == Kind::rule && nullable[elements_[p].value]) ++p;
                    if (elements_[p].kind == Kind::end) {
                        nullable[r] = changed = true;
                        break;
                    }
                }
            }
        }
        for (std::uint32_t start = 0; start < rules_.size(); ++start) {
            std::vector<std::uint32_t> todo{start};
            std::vector<bool> seen(rules_.size(), false);
            while (!todo.empty()) {
                const std::uint32_t r = todo.back();
                todo.pop_back();
                for (std::uint32_t p : rules_[r])
                    for (; elements_[p].kind == Kind::rule; ++p) {
                        const std::uint32_t next = elements_[p].value;
                        if (next == start) fail("grammar: rule '", names_[start], "' is left-recursive");
                        if (!seen[next]) {
                            seen[next] = true;
                            todo.push_back(next);
                        }
                        if (!nullable[next]) break;
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
                    ++pos_;
                    std::vector<Sequence> inner = parse_alternatives(rule, true);
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
    // grow with the length of the text).
    void compact(GrammarState& s) {
        std::vector<Node> old = std::move(nodes_);
        nodes_.clear();
        std::map<std::int32_t, std::int32_t> moved;
        const auto copy = [&](auto&& self, std::int32_t node) -> std::int32_t {
            if (node < 0) return node;
            if (const auto it = moved.find(node); it != moved.end()) return it->second;
            const std::int32_t parent = self(self, old[std::size_t(node)].parent);
            nodes_.push_back({old[std::size_t(node)].position, parent});
            return moved[node] = std::int32_t(nodes_.size() - 1);
        };
        for (std::int32_t& top : s.stacks) top = copy(copy, top);
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

    // Guards against grammars that nest without consuming (left recursion is refused at parse
    // time; this bounds what remains, such as deep chains of empty rules).
    static constexpr int kMaxExpansion = 10000;

    // Pushes the stacks that continue at `position` with `below` underneath, resolving rule
    // references and rule ends until each top is a character class (or the stack is accepted).
    void expand(std::uint32_t position, std::int32_t below, std::vector<std::int32_t>& out, int depth = 0) {
        if (depth > kMaxExpansion) fail("grammar: expansion too deep (a rule nests without consuming text)");
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
    void dedupe(std::vector<std::int32_t>& stacks) const {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < stacks.size(); ++i) {
            bool seen = false;
            for (std::size_t j = 0; j < kept && !seen; ++j) seen = same(stacks[i], stacks[j]);
            if (!seen) stacks[kept++] = stacks[i];
        }
        stacks.resize(kept);
    }

    bool same(std::int32_t a, std::int32_t b) const {
        while (a >= 0 && b >= 0) {
            if (a == b) return true;
            if (nodes_[std::size_t(a)].position != nodes_[std::size_t(b)].position) return false;
            a = nodes_[std::size_t(a)].parent;
            b = nodes_[std::size_t(b)].parent;
        }
        return a == b;
    }
};

// A JSON object (RFC 8259's grammar, whitespace limited to a short run so that a weak model
// cannot spend its tokens on it): what response_format {"type": "json_object"} asks for.
inline constexpr std::string_view kJsonObjectGrammar = R"gbnf(
root    ::= object
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,8}
)gbnf";

}  // namespace smol::text
