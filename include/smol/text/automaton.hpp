#pragma once
// Finite automata over Unicode code points, for what a pattern alone cannot say as grammar: the
// strings that match two patterns at once (a JSON schema's `pattern` beside its `format`), a
// pattern within minLength/maxLength, and a pattern after lookaheads. Each is a regular
// language; GBNF has no intersection, so the languages are built as automata, intersected by
// the product construction, and the result written back as one GBNF rule per state.
//
//   pattern text --(text/json_schema_pattern.hpp)--> Nfa fragments, one shared arena
//   Nfa --determinize--> Dfa (over the arena's alphabet: code point intervals no set splits)
//   Dfa x Dfa --product--> Dfa (both, first-but-not-second for a negative lookahead, either)
//   Dfa --within_lengths, minimized, to_gbnf--> rules: state ::= [chars] next-state | ...
//
// Every step is bounded: a Dfa holds at most kMaxAutomatonStates states and all steps of one
// compile share a budget of kMaxAutomatonWork units; past either, GrammarTooComplex names where.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "smol/text/grammar.hpp"

namespace smol::text {

inline constexpr std::size_t kMaxAutomatonStates = 4096;
inline constexpr std::uint64_t kMaxAutomatonWork = std::uint64_t(1) << 24;

namespace automaton {

using CodeRanges = std::vector<std::pair<char32_t, char32_t>>;  // inclusive, sorted, disjoint

// Thompson's construction's automaton: states joined by empty moves and by moves on a set.
struct Nfa {
    struct State {
        std::vector<int> empty;                  // targets reached without reading
        std::vector<std::pair<int, int>> moves;  // (index into sets, target)
    };
    std::vector<State> states;
    std::vector<CodeRanges> sets;

    int add_state() {
        states.emplace_back();
        return int(states.size() - 1);
    }
    void add_move(int from, const CodeRanges& set, int to) {
        sets.push_back(set);
        states[std::size_t(from)].moves.push_back({int(sets.size() - 1), to});
    }
    // Appends a copy of states [first, end) (a fragment whose moves stay inside it); returns the
    // offset from an original state to its copy.
    int copy(int first, int end) {
        const int offset = int(states.size()) - first;
        for (int s = first; s < end; ++s) {
            State copied = states[std::size_t(s)];
            for (int& t : copied.empty) t += offset;
            for (auto& [set, t] : copied.moves) t += offset;
            states.push_back(std::move(copied));
        }
        return offset;
    }
};

// A deterministic automaton over an alphabet of classes (code point intervals): next[s][c] is -1
// where no string through that move is in the language.
struct Dfa {
    int classes = 0;
    std::vector<int> next;  // [state * classes + class]
    std::vector<char> accepting;
    int start = -1;  // -1: the empty language

    int size() const { return int(accepting.size()); }
    int at(int s, int c) const { return next[std::size_t(s) * std::size_t(classes) + std::size_t(c)]; }
    int add_state(bool accepts) {
        accepting.push_back(accepts);
        next.resize(next.size() + std::size_t(classes), -1);
        return size() - 1;
    }
};

enum class Combine { both, first_not_second, either };

// One compile's automata: the arena, its alphabet and the budget they share.
class Builder {
public:
    explicit Builder(std::string where) : where_(std::move(where)) {}

    Nfa nfa;

    // Fixes the alphabet from every set in the arena; call once all patterns are in it.
    void close_alphabet() {
        std::vector<char32_t> cuts = {0, 0xD800, 0xE000, 0x110000};
        for (const CodeRanges& set : nfa.sets)
            for (const auto& [lo, hi] : set) {
                cuts.push_back(lo);
                cuts.push_back(hi + 1);
            }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
            if (cuts[i] != 0xD800) classes_.push_back({cuts[i], cuts[i + 1] - 1});  // surrogates are no characters
        set_classes_.resize(nfa.sets.size());
        for (std::size_t s = 0; s < nfa.sets.size(); ++s)
            for (const auto& [lo, hi] : nfa.sets[s]) {
                spend(classes_.size() / 8 + 1);
                for (int c = class_of(lo); c < int(classes_.size()) && classes_[std::size_t(c)].second <= hi; ++c)
                    set_classes_[s].push_back(c);
            }
    }

    // Subset construction from `in` to `out` (the accepting state).
    Dfa determinize(int in, int out) {
        Dfa d;
        d.classes = int(classes_.size());
        std::map<std::vector<int>, int> known;
        std::vector<std::vector<int>> subsets;
        const auto state_of = [&](std::vector<int> subset) {
            if (const auto it = known.find(subset); it != known.end()) return it->second;
            const int s = d.add_state(std::binary_search(subset.begin(), subset.end(), out));
            check_states(d);
            spend(subset.size());
            subsets.push_back(subset);
            known.emplace(std::move(subset), s);
            return s;
        };
        d.start = state_of(closure({in}));
        std::vector<std::vector<int>> buckets(classes_.size());
        for (int s = 0; s < d.size(); ++s) {
            for (auto& b : buckets) b.clear();
            for (const int n : subsets[std::size_t(s)])
                for (const auto& [set, target] : nfa.states[std::size_t(n)].moves) {
                    spend(set_classes_[std::size_t(set)].size());
                    for (const int c : set_classes_[std::size_t(set)]) buckets[std::size_t(c)].push_back(target);
                }
            for (std::size_t c = 0; c < buckets.size(); ++c)
                if (!buckets[c].empty()) {
                    const int t = state_of(closure(buckets[c]));
                    d.next[std::size_t(s) * classes_.size() + c] = t;
                }
        }
        return trimmed(d);
    }

    // The product of a and b: the strings both take, a takes and b does not, or either takes.
    Dfa combine(const Dfa& a, const Dfa& b, Combine how) {
        Dfa d;
        d.classes = int(classes_.size());
        std::map<std::pair<int, int>, int> known;
        std::vector<std::pair<int, int>> pairs;
        const auto accepts = [](const Dfa& x, int s) { return s >= 0 && x.accepting[std::size_t(s)]; };
        const auto state_of = [&](int sa, int sb) {
            const bool dead = how == Combine::both ? (sa < 0 || sb < 0) : how == Combine::first_not_second ? sa < 0 : (sa < 0 && sb < 0);
            if (dead) return -1;
            if (const auto it = known.find({sa, sb}); it != known.end()) return it->second;
            const bool accept = how == Combine::both ? accepts(a, sa) && accepts(b, sb)
                              : how == Combine::first_not_second ? accepts(a, sa) && !accepts(b, sb)
                                                                 : accepts(a, sa) || accepts(b, sb);
            const int s = d.add_state(accept);
            check_states(d);
            known.emplace(std::pair{sa, sb}, s);
            pairs.push_back({sa, sb});
            return s;
        };
        d.start = state_of(a.start, b.start);
        for (int s = 0; s < d.size(); ++s) {
            spend(std::uint64_t(d.classes));
            const auto [sa, sb] = pairs[std::size_t(s)];
            for (int c = 0; c < d.classes; ++c) {
                const int t = state_of(sa < 0 ? -1 : a.at(sa, c), sb < 0 ? -1 : b.at(sb, c));
                d.next[std::size_t(s) * std::size_t(d.classes) + std::size_t(c)] = t;
            }
        }
        return trimmed(d);
    }

    // The strings of a with at least min and (max >= 0) at most max characters: a's states
    // paired with a count of characters read, capped where counting further changes nothing.
    Dfa within_lengths(const Dfa& a, std::uint64_t min, std::int64_t max) {
        Dfa d;
        d.classes = a.classes;
        const std::uint64_t cap = max >= 0 ? std::uint64_t(max) : min;
        std::map<std::pair<int, std::uint64_t>, int> known;
        std::vector<std::pair<int, std::uint64_t>> pairs;
        const auto state_of = [&](int sa, std::uint64_t n) {
            if (sa < 0 || (max >= 0 && n > cap)) return -1;
            n = std::min(n, cap);
            if (const auto it = known.find({sa, n}); it != known.end()) return it->second;
            const int s = d.add_state(a.accepting[std::size_t(sa)] && n >= min);
            check_states(d);
            known.emplace(std::pair{sa, n}, s);
            pairs.push_back({sa, n});
            return s;
        };
        d.start = state_of(a.start, 0);
        for (int s = 0; s < d.size(); ++s) {
            spend(std::uint64_t(d.classes));
            const auto [sa, n] = pairs[std::size_t(s)];
            for (int c = 0; c < d.classes; ++c)
                d.next[std::size_t(s) * std::size_t(d.classes) + std::size_t(c)] = state_of(a.at(sa, c), n + 1);
        }
        return trimmed(d);
    }

    // The same language with equivalent states merged: fewer rules. Hopcroft's partition
    // refinement, O(classes * states * log states), over the automaton completed with a dead
    // state (where a move is -1); the dead state's block becomes -1 again.
    Dfa minimized(const Dfa& a) {
        if (a.start < 0) return a;
        const int n = a.size() + 1, k = a.classes, dead = n - 1;
        const auto [first, into] = inverse(a);
        // The partition: elements grouped by block, each block a range [begin, end) of them.
        std::vector<int> elems, begin, end, marked;
        std::vector<int> where(static_cast<std::size_t>(n), 0), block(static_cast<std::size_t>(n), 0);
        for (const bool accepting : {true, false}) {
            const int b = int(begin.size());
            begin.push_back(int(elems.size()));
            for (int s = 0; s < n; ++s)
                if (s != dead && bool(a.accepting[std::size_t(s)]) == accepting) elems.push_back(s);
            if (!accepting) elems.push_back(dead);
            end.push_back(int(elems.size()));
            marked.push_back(0);
            if (begin[std::size_t(b)] == end[std::size_t(b)]) {
                begin.pop_back();
                end.pop_back();
                marked.pop_back();
            }
        }
        for (std::size_t i = 0; i < begin.size(); ++i)
            for (int e = begin[i]; e < end[i]; ++e) block[std::size_t(elems[std::size_t(e)])] = int(i);
        for (int e = 0; e < n; ++e) where[std::size_t(elems[std::size_t(e)])] = e;
        std::vector<std::pair<int, int>> work;  // (block, class) splitters
        std::vector<char> waiting;              // [block * k + class]
        waiting.resize(begin.size() * std::size_t(k), 0);
        const auto wait = [&](int b, int c) {
            waiting[std::size_t(b) * std::size_t(k) + std::size_t(c)] = 1;
            work.push_back({b, c});
        };
        if (begin.size() == 2)
            for (int c = 0; c < k; ++c) wait(end[0] - begin[0] <= end[1] - begin[1] ? 0 : 1, c);
        std::vector<int> sources, touched;
        while (!work.empty()) {
            const auto [splitter, c] = work.back();
            work.pop_back();
            waiting[std::size_t(splitter) * std::size_t(k) + std::size_t(c)] = 0;
            sources.clear();
            for (int e = begin[std::size_t(splitter)]; e < end[std::size_t(splitter)]; ++e) {
                const std::size_t t = std::size_t(c) * std::size_t(n) + std::size_t(elems[std::size_t(e)]);
                sources.insert(sources.end(), into.begin() + first[t], into.begin() + first[t + 1]);
            }
            spend(sources.size() + 1);
            touched.clear();
            for (const int p : sources) {  // move each source to the front of its block
                const std::size_t b = std::size_t(block[std::size_t(p)]);
                if (marked[b] == 0) touched.push_back(int(b));
                const int to = begin[b] + marked[b]++;
                const int other = elems[std::size_t(to)];
                std::swap(elems[std::size_t(to)], elems[std::size_t(where[std::size_t(p)])]);
                where[std::size_t(other)] = where[std::size_t(p)];
                where[std::size_t(p)] = to;
            }
            for (const int b : touched) {
                const int m = std::exchange(marked[std::size_t(b)], 0);
                if (m == end[std::size_t(b)] - begin[std::size_t(b)]) continue;
                const int split = int(begin.size());  // the marked front becomes a block of its own
                begin.push_back(begin[std::size_t(b)]);
                end.push_back(begin[std::size_t(b)] + m);
                marked.push_back(0);
                begin[std::size_t(b)] += m;
                for (int e = begin[std::size_t(split)]; e < end[std::size_t(split)]; ++e) block[std::size_t(elems[std::size_t(e)])] = split;
                waiting.resize(begin.size() * std::size_t(k), 0);
                const bool split_smaller = m <= end[std::size_t(b)] - begin[std::size_t(b)];
                for (int x = 0; x < k; ++x)
                    if (waiting[std::size_t(b) * std::size_t(k) + std::size_t(x)]) wait(split, x);
                    else wait(split_smaller ? split : b, x);
            }
        }
        std::vector<int> representative;
        for (const int b : begin) representative.push_back(elems[std::size_t(b)]);
        return quotient(a, representative, block);
    }

    // One state per block but the dead state's, moving as its representative state does.
    static Dfa quotient(const Dfa& a, const std::vector<int>& representative, const std::vector<int>& block) {
        std::vector<int> renamed(representative.size(), -1);
        Dfa d;
        d.classes = a.classes;
        for (std::size_t b = 0; b < representative.size(); ++b)
            if (int(b) != block[std::size_t(a.size())])
                renamed[b] = d.add_state(a.accepting[std::size_t(representative[b])]);
        for (std::size_t b = 0; b < representative.size(); ++b)
            for (int c = 0; renamed[b] >= 0 && c < a.classes; ++c)
                d.next[std::size_t(renamed[b]) * std::size_t(a.classes) + std::size_t(c)] =
                    renamed[std::size_t(block[std::size_t(completed(a, representative[b], c))])];
        d.start = renamed[std::size_t(block[std::size_t(a.start)])];
        return d;
    }

    // a's move from s on c, with a dead state (a.size()) where a has none.
    static int completed(const Dfa& a, int s, int c) { return s == a.size() || a.at(s, c) < 0 ? a.size() : a.at(s, c); }

    // Who moves into each state on each class, a completed with its dead state: the sources of
    // (c, t) are into[first[c * n + t] ... first[c * n + t + 1]), n states with the dead one.
    std::pair<std::vector<int>, std::vector<int>> inverse(const Dfa& a) {
        const std::size_t n = std::size_t(a.size()) + 1, k = std::size_t(a.classes);
        spend(n * k);
        std::vector<int> first(k * n + 1, 0), into(k * n);
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < k; ++c) ++first[c * n + std::size_t(completed(a, int(s), int(c))) + 1];
        std::partial_sum(first.begin(), first.end(), first.begin());
        std::vector<int> fill(first.begin(), first.end() - 1);
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < k; ++c) into[std::size_t(fill[c * n + std::size_t(completed(a, int(s), int(c)))]++)] = int(s);
        return {std::move(first), std::move(into)};
    }

    // GBNF rules for the language, one per state, named `prefix-<state>`; set_rule(ranges)
    // names the rule of one character of a set. Returns the start state's rule name.
    // max_elements bounds the rules' size (GrammarTooComplex past it).
    std::string to_gbnf(const Dfa& d, const std::string& prefix, const std::function<std::string(const CodeRanges&)>& set_rule,
                        const std::function<void(const std::string&, const std::string&)>& define, std::uint64_t max_elements) {
        const auto name = [&](int s) { return prefix + "-" + std::to_string(s); };
        std::uint64_t elements = 0;
        for (int s = 0; s < d.size(); ++s) {
            std::map<int, CodeRanges> by_target;
            for (int c = 0; c < d.classes; ++c)
                if (const int t = d.at(s, c); t >= 0) by_target[t].push_back(classes_[std::size_t(c)]);
            std::string body;
            for (auto& [t, ranges] : by_target) body += (body.empty() ? "" : " | ") + set_rule(merged(ranges)) + " " + name(t);
            if (d.accepting[std::size_t(s)]) body += body.empty() ? "\"\"" : " | \"\"";
            elements += 2 * by_target.size() + 1;
            if (elements > max_elements)
                throw GrammarTooComplex("JSON schema: the strings at " + where_ + " need more than " + std::to_string(max_elements) +
                                        " grammar elements as an automaton; the limit is " + std::to_string(max_elements));
            define(name(s), body);
        }
        return name(d.start);
    }

private:
    std::string where_;
    CodeRanges classes_;
    std::vector<std::vector<int>> set_classes_;
    std::uint64_t work_ = 0;
    std::vector<int> seen_;
    int stamp_ = 0;

    void spend(std::uint64_t units) {
        work_ += units;
        if (work_ > kMaxAutomatonWork)
            throw GrammarTooComplex("JSON schema: intersecting the pattern, format and lengths at " + where_ + " takes more than " +
                                    std::to_string(kMaxAutomatonWork) + " steps; the limit is " + std::to_string(kMaxAutomatonWork));
    }
    void check_states(const Dfa& d) const {
        if (std::size_t(d.size()) > kMaxAutomatonStates)
            throw GrammarTooComplex("JSON schema: the strings at " + where_ + " (pattern, format and lengths together) need more than " +
                                    std::to_string(kMaxAutomatonStates) + " automaton states; the limit is " +
                                    std::to_string(kMaxAutomatonStates));
    }

    int class_of(char32_t c) const {
        const auto it = std::upper_bound(classes_.begin(), classes_.end(), c, [](char32_t v, const auto& r) { return v < r.first; });
        return int(it - classes_.begin()) - 1;
    }

    static CodeRanges merged(CodeRanges r) {
        CodeRanges out;
        for (const auto& [lo, hi] : r) {
            if (!out.empty() && lo == out.back().second + 1) out.back().second = hi;
            else out.push_back({lo, hi});
        }
        return out;
    }

    // The states reachable from `from` by empty moves, sorted.
    std::vector<int> closure(const std::vector<int>& from) {
        seen_.resize(nfa.states.size(), 0);
        ++stamp_;
        std::vector<int> out, stack;
        for (const int s : from)
            if (seen_[std::size_t(s)] != stamp_) {
                seen_[std::size_t(s)] = stamp_;
                stack.push_back(s);
            }
        while (!stack.empty()) {
            const int s = stack.back();
            stack.pop_back();
            out.push_back(s);
            spend(1);
            for (const int t : nfa.states[std::size_t(s)].empty)
                if (seen_[std::size_t(t)] != stamp_) {
                    seen_[std::size_t(t)] = stamp_;
                    stack.push_back(t);
                }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    // Without the states from which no accepting state is reached (moves to them become -1)
    // and those the start does not reach.
    Dfa trimmed(const Dfa& a) {
        std::vector<std::vector<int>> into(std::size_t(a.size()));
        for (int s = 0; s < a.size(); ++s)
            for (int c = 0; c < a.classes; ++c)
                if (const int t = a.at(s, c); t >= 0) into[std::size_t(t)].push_back(s);
        spend(std::uint64_t(a.size()) * std::uint64_t(a.classes));
        std::vector<char> live(std::size_t(a.size()), 0);
        std::vector<int> stack;
        for (int s = 0; s < a.size(); ++s)
            if (a.accepting[std::size_t(s)]) {
                live[std::size_t(s)] = 1;
                stack.push_back(s);
            }
        while (!stack.empty()) {
            const int s = stack.back();
            stack.pop_back();
            for (const int p : into[std::size_t(s)])
                if (!live[std::size_t(p)]) {
                    live[std::size_t(p)] = 1;
                    stack.push_back(p);
                }
        }
        Dfa d;
        d.classes = a.classes;
        if (a.start < 0 || !live[std::size_t(a.start)]) return d;
        std::vector<int> renamed(std::size_t(a.size()), -1);
        std::vector<int> order{a.start};
        renamed[std::size_t(a.start)] = d.add_state(a.accepting[std::size_t(a.start)]);
        for (std::size_t i = 0; i < order.size(); ++i)
            for (int c = 0; c < a.classes; ++c) {
                const int t = a.at(order[i], c);
                if (t < 0 || !live[std::size_t(t)]) continue;
                if (renamed[std::size_t(t)] < 0) {
                    renamed[std::size_t(t)] = d.add_state(a.accepting[std::size_t(t)]);
                    order.push_back(t);
                }
                d.next[i * std::size_t(a.classes) + std::size_t(c)] = renamed[std::size_t(t)];
            }
        d.start = 0;
        return d;
    }
};

}  // namespace automaton

}  // namespace smol::text
