#!/usr/bin/env python3
"""Generates include/smol/text/unicode_tables.hpp from Python's unicodedata module.

The byte-level BPE pre-tokenizer (the Llama-3 regex used by SmolLM3) needs three character
classes, defined as the regex engines behind Hugging Face tokenizers and llama.cpp define them:

  \\p{L}  letters:    general categories Lu, Ll, Lt, Lm, Lo
  \\p{N}  numbers:    general categories Nd, Nl, No
  \\s     whitespace: the Unicode White_Space property. unicodedata does not expose it, but
                     it is exactly Zs + Zl + Zp + U+0009..U+000D + U+0085 (PropList.txt);
                     note that str.isspace() is NOT the same set (it adds U+001C..U+001F).

The three sets are disjoint, so one sorted table of [first, last, class] ranges holds them all;
code points outside every range are "other" (punctuation, symbols, marks, controls, unassigned).

The contractions (?i:'s|'t|'re|'ve|'m|'ll|'d) are matched case-insensitively. This script checks
that no code point outside ASCII lowercases to one of those letters, which is what lets the
tokenizer fold case with plain ASCII arithmetic instead of a lowercase table.

Usage (from the repository root):
    python3 tools/gen_unicode_tables.py > include/smol/text/unicode_tables.hpp
"""

import sys
import unicodedata

MAX_CODEPOINT = 0x10FFFF

LETTER, NUMBER, WHITESPACE = 1, 2, 3
CLASS_NAMES = {LETTER: "Letter", NUMBER: "Number", WHITESPACE: "Whitespace"}


def char_class(cp: int) -> int:
    if cp in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85):
        return WHITESPACE
    category = unicodedata.category(chr(cp))
    if category in ("Zs", "Zl", "Zp"):
        return WHITESPACE
    if category[0] == "L":
        return LETTER
    if category[0] == "N":
        return NUMBER
    return 0


def class_ranges():
    ranges = []  # [first, last, class], adjacent equal classes merged
    for cp in range(MAX_CODEPOINT + 1):
        cls = char_class(cp)
        if cls == 0:
            continue
        if ranges and ranges[-1][2] == cls and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, cls])
    return ranges


def check_ascii_case_folding_suffices():
    contraction_letters = set("stmdrevl")
    for cp in range(0x80, MAX_CODEPOINT + 1):
        lowered = chr(cp).lower()
        if len(lowered) == 1 and lowered in contraction_letters:
            sys.exit(f"U+{cp:04X} lowercases to '{lowered}': ASCII case folding is not enough")


def check_whitespace_matches_white_space_property(ranges):
    # The White_Space property as listed in PropList.txt (stable since Unicode 6.3).
    expected = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
                0x205F, 0x3000} | set(range(0x2000, 0x200B))
    found = {cp for first, last, cls in ranges if cls == WHITESPACE for cp in range(first, last + 1)}
    if found != expected:
        sys.exit(f"whitespace set differs from White_Space: {sorted(found ^ expected)}")


def main():
    ranges = class_ranges()
    check_ascii_case_folding_suffices()
    check_whitespace_matches_white_space_property(ranges)

    out = sys.stdout
    out.write("#pragma once\n")
    out.write("// GENERATED FILE, do not edit. Regenerate from the repository root with\n")
    out.write("//     python3 tools/gen_unicode_tables.py > include/smol/text/unicode_tables.hpp\n")
    out.write(f"// Source: Python {sys.version.split()[0]} unicodedata, Unicode {unicodedata.unidata_version}.\n")
    out.write("// Character classes of the pre-tokenizer regex: \\p{L} (Lu Ll Lt Lm Lo), \\p{N} (Nd Nl No)\n")
    out.write("// and \\s (the White_Space property). Code points in no range are 'other'.\n\n")
    out.write("#include <cstdint>\n\n")
    out.write("namespace smol::text::unicode_tables {\n\n")
    out.write(f'inline constexpr char kUnicodeVersion[] = "{unicodedata.unidata_version}";\n\n')
    out.write("enum class CharClass : std::uint8_t { Other = 0, Letter = 1, Number = 2, Whitespace = 3 };\n\n")
    out.write("struct ClassRange {\n")
    out.write("    std::uint32_t first;\n")
    out.write("    std::uint32_t last;  // inclusive\n")
    out.write("    CharClass char_class;\n")
    out.write("};\n\n")
    out.write(f"// {len(ranges)} ranges, sorted by first code point, disjoint.\n")
    out.write("inline constexpr ClassRange kClassRanges[] = {\n")
    for first, last, cls in ranges:
        out.write(f"    {{0x{first:05X}, 0x{last:05X}, CharClass::{CLASS_NAMES[cls]}}},\n")
    out.write("};\n\n")
    out.write("}  // namespace smol::text::unicode_tables\n")


if __name__ == "__main__":
    main()
