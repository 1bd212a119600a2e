#!/usr/bin/env bash
# Every JSON text smol parses goes through smol::parse_json / try_parse_json
# (include/smol/core/bounded_json.hpp), which measures depth and values before nlohmann builds
# anything. A parse anywhere else is how a request once crashed the server (JSON inside a
# string field, parsed without the caps): this check fails on any such call in the code that
# ships (tests may parse their own trusted data freely).
#
# usage: scripts/check-json-parsing.sh [repository root]
set -euo pipefail
root=${1:-$(dirname "${BASH_SOURCE[0]}")/..}
cd "$root"
entry=include/smol/core/bounded_json.hpp
# Json::parse / json::parse / ordered_json::parse / basic_json<...>::parse, sax_parse, the binary
# formats' readers, json::accept (which builds nothing but recurses the same way is not the
# point: it walks texts past the caps) and stream extraction into a JSON value.
pattern='(json|Json|basic_json<[^>]*>)::(parse|sax_parse|accept|from_cbor|from_msgpack|from_ubjson|from_bjdata|from_bson)\b|>>[[:space:]]*[A-Za-z_]*json\b|\.parse\(\s*[a-z_]*,\s*nullptr'
hits=$(grep -rnE "$pattern" include examples tools bench fuzz --include='*.hpp' --include='*.cpp' --include='*.h' | grep -v "^$entry:" || true)
if [[ -n "$hits" ]]; then
  echo "check-json-parsing: JSON parsed outside $entry; call smol::parse_json or smol::try_parse_json:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "check-json-parsing: every JSON parse in include/ examples/ tools/ bench/ fuzz/ goes through $entry"
