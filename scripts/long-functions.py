#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (80 lines unless told), longest first.

A heuristic scan, not a parser: comments, strings and character literals are blanked, then braces
are matched; a `{` whose text since the previous `;`, `{` or `}` ends in `)` (with any of const,
noexcept, override, mutable, a trailing return type or a member initialiser list after it) and
does not follow if/for/while/switch/catch opens a function. Lambdas and local classes count toward
the function they sit in. A function whose first body line, or one of the three lines above its
signature, is a comment starting `Long:` (the reason it stays one piece) is listed as explained.

Usage: long-functions.py [--limit N] [--check] [PATH ...]   (default paths: include examples/server)
--check: exit 1 when a function over the limit has no stated reason (the ctest long_functions).
"""
import argparse
import os
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
           "static_assert", "noexcept", "requires", "alignas", "defined"}
REASON = re.compile(r"^\s*//\s*Long:")
SIGNATURE_END = re.compile(
    r"\)\s*(?:const\s*|noexcept(?:\([^()]*\))?\s*|override\s*|final\s*|mutable\s*|&\s*|&&\s*)*"
    r"(?:->\s*[\w:<>,\s*&]+)?\s*$")


def blank(text):
    """`text` with comments, strings and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 4'096
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(head):
    """The name a function's head declares: the identifier before its parameter list."""
    head = re.sub(r"\s+", " ", head)
    # A member initialiser list follows ") :"; the name is before the first "(" then.
    for m in re.finditer(r"((?:operator\s*\S+?|~?[A-Za-z_]\w*)(?:::~?[A-Za-z_]\w*)*)\s*(?:<[^()]*>)?\s*\(", head):
        name = m.group(1)
        if name.split("::")[-1] in CONTROL:
            return None
        if name in {"template"}:
            continue
        return name
    return None


def scan(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    lines = raw.split("\n")
    text = blank(raw)
    found = []
    depth = 0
    function_depth = None  # the depth of the function being read, if any
    start_line = 0
    name = None
    head_from = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            if function_depth is None:
                head = text[head_from:i]
                if SIGNATURE_END.search(head) or re.search(r"\)\s*:\s*[\w:]+\s*[({]", head):
                    fname = function_name(head)
                    if fname:
                        function_depth = depth
                        name = fname
                        # the signature's first line (blank lines before it not counted)
                        start_line = line - text[head_from:i].lstrip().count("\n")
                        body_line = line
            depth += 1
            head_from = i + 1
        elif c == "}":
            depth -= 1
            if function_depth is not None and depth == function_depth:
                length = line - start_line + 1
                found.append((length, path, start_line, name, explained(lines, start_line, body_line)))
                function_depth = None
            head_from = i + 1
        elif c == ";":
            head_from = i + 1
    return found


def explained(lines, start_line, body_line):
    above = lines[max(0, start_line - 4):start_line - 1]
    first = lines[body_line:body_line + 1]  # the line after the one with the opening brace
    return any(REASON.match(l) for l in above + first)


def main():
    parser = argparse.ArgumentParser(description="Lists C++ functions over a length limit.")
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--root", default=".")
    parser.add_argument("paths", nargs="*", default=["include", "examples/server"])
    args = parser.parse_args()
    files = []
    for p in args.paths:
        p = os.path.join(args.root, p)
        if os.path.isfile(p):
            files.append(p)
        for dirpath, _, names in os.walk(p):
            files += [os.path.join(dirpath, n) for n in names if n.endswith((".hpp", ".cpp", ".h"))]
    rows = []
    for f in sorted(files):
        rows += [r for r in scan(f) if r[0] > args.limit]
    rows.sort(key=lambda r: (-r[0], r[1]))
    unexplained = 0
    sys.stdout.reconfigure(errors="replace")
    for length, path, start, name, ok in rows:
        print(f"{length:5d}  {os.path.relpath(path, args.root)}:{start}  {name}{'  (Long: reason stated)' if ok else ''}")
        unexplained += not ok
    print(f"{len(rows)} functions over {args.limit} lines, {unexplained} without a stated reason")
    return 1 if args.check and unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
