#pragma once
// Streaming stop strings: text is emitted as soon as it can no longer be part of a stop
// string; a tail that could still grow into one is held back. On the first complete match
// the matcher stops and nothing from the stop string on is ever emitted. Matching is on
// bytes, so stop strings may span any number of pieces and split UTF-8 sequences.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

namespace smol {

class StopStringMatcher {
public:
    struct Result {
        std::string emit;      // text safe to show now
        bool stopped = false;  // a stop string completed: stop generating
    };

    explicit StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
        for (std::size_t i = 0; i < stops_.size(); ++i)
            if (stops_[i].empty())
                fail("StopStringMatcher: stop string ", i, " is empty; an empty stop would end generation at once");
    }

    Result push(std::string_view text) {
        Result out;
        if (stopped_) {
            out.stopped = true;
            return out;
        }
        held_.append(text);

        // The earliest-starting complete match wins: everything from it on is dropped.
        std::size_t match = std::string::npos;
        for (std::size_t i = 0; i < stops_.size(); ++i) {
            const std::size_t at = held_.find(stops_[i]);
            if (at < match) {
                match = at;
                matched_ = i;
            }
        }
        if (match != std::string::npos) {
            out.emit = held_.substr(0, match);
            held_.clear();
            stopped_ = true;
            out.stopped = true;
            return out;
        }

        const std::size_t hold = longest_partial_suffix();
        out.emit = held_.substr(0, held_.size() - hold);
        held_.erase(0, held_.size() - hold);
        return out;
    }

    // End of generation without a match: the held-back tail was not a stop string after all.
    std::string finish() {
        std::string rest = std::move(held_);
        held_.clear();
        return stopped_ ? std::string() : rest;
    }

    bool stopped() const { return stopped_; }
    // The stop string that ended the text (the first listed among those starting earliest);
    // empty before a match. APIs that report it (Anthropic's stop_sequence) read it here.
    std::string_view matched() const { return stopped_ ? std::string_view(stops_[matched_]) : std::string_view(); }
    const std::vector<std::string>& stops() const { return stops_; }

private:
    // Length of the longest suffix of held_ that is a proper prefix of some stop string.
    std::size_t longest_partial_suffix() const {
        const std::string_view text = held_;
        std::size_t best = 0;
        for (const std::string& stop : stops_) {
            for (std::size_t length = std::min(text.size(), stop.size() - 1); length > best; --length)
                if (text.substr(text.size() - length) == std::string_view(stop).substr(0, length)) {
                    best = length;
                    break;
                }
        }
        return best;
    }

    std::vector<std::string> stops_;
    std::string held_;  // [< longest stop] tail that may still become a stop string
    bool stopped_ = false;
    std::size_t matched_ = 0;  // index into stops_, meaningful once stopped_
};

}  // namespace smol
