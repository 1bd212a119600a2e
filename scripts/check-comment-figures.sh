#!/usr/bin/env bash
# Code comments say what the code does and why; the measurements behind a choice (t/s, GB/s,
# GMAC/s, llama-bench test names such as pp512 / tg32) go to docs/performance.md with their
# machine, date and commit, because in a comment they go stale with the next kernel change and
# nobody reruns them there (issue 45). This check fails on any comment under include/ that
# quotes such a figure:
#   - a throughput unit (t/s, tok/s, tokens/s, GB/s, MB/s, GiB/s, MiB/s, GMAC/s) on a comment
#     line that also carries a number (a unit named without one, "bytes read per token, for
#     GB/s", is not a figure);
#   - a pp<N> / tg<N> test name.
# A comment is the text after `//` on a line, or a line inside a /* */ block that starts with
# `/*` or `*`.
#
# usage: scripts/check-comment-figures.sh [repository root]
set -euo pipefail
root=${1:-$(dirname "${BASH_SOURCE[0]}")/..}
cd "$root"

# Allowed: comments that quote a unit as an example of what the program prints, not as a
# measurement. One entry a line, "path<TAB>text the line contains" (matched as a fixed string,
# so an entry stops matching when the comment changes and has to be looked at again).
allowed=$(printf '%s\n' \
  $'include/smol/hub/progress.hpp\t"45% 812.3 MB / 1.80 GB, 35.2 MB/s, ETA 00:28"' \
)

hits=$(find include -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' \) -print | LC_ALL=C sort |
  ALLOWED="$allowed" LC_ALL=C awk '
    BEGIN {
      n = split(ENVIRON["ALLOWED"], lines, "\n")
      for (i = 1; i <= n; ++i) {
        if (lines[i] == "") continue
        tab = index(lines[i], "\t")
        allow_file[i] = substr(lines[i], 1, tab - 1)
        allow_text[i] = substr(lines[i], tab + 1)
      }
      unit = "(^|[^A-Za-z])(t|tok|tokens|GB|MB|GiB|MiB|GMAC)/s([^A-Za-z]|$)"
      test_name = "(^|[^A-Za-z0-9_])(pp|tg)[0-9]+([^A-Za-z0-9_]|$)"
    }
    {
      while ((getline line < $0) > 0) {
        ++lineno
        comment = ""
        at = index(line, "//")
        if (at > 0) comment = substr(line, at + 2)
        else if (line ~ /^[ \t]*(\/\*|\*)/) comment = line
        if (comment == "") continue
        if (!((comment ~ unit && comment ~ /[0-9]/) || comment ~ test_name)) continue
        ok = 0
        for (i in allow_file)
          if (allow_file[i] == $0 && index(line, allow_text[i]) > 0) ok = 1
        if (!ok) print $0 ":" lineno ": " line
      }
      close($0)
      lineno = 0
    }')
if [[ -n "$hits" ]]; then
  echo "check-comment-figures: comments under include/ quote benchmark figures; keep the reason in" >&2
  echo "the comment and move the figures to docs/performance.md (\"Design measurements behind the" >&2
  echo "kernels\"), or add a format example to the script's allowed list:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "check-comment-figures: no comment under include/ quotes a benchmark figure"
