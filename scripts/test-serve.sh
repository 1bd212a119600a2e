#!/usr/bin/env bash
# The README's main command on a machine with no model: scripts/serve.sh fetches the default
# model (a local stand-in for the Hugging Face Hub serves the tiny fixture model under the
# default repository's name), starts the server, and the server answers a chat completion.
# usage: scripts/test-serve.sh   (after the release build in build/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d)
hub_pid= server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
  [[ -n "$hub_pid" ]] && kill "$hub_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The Hub's two routes smol uses: the model API listing and resolve/main/<file>.
repo=ggml-org/SmolLM3-3B-GGUF file=SmolLM3-3B-Q4_K_M.gguf
mkdir -p "$work/hub/api/models/$repo" "$work/hub/$repo/resolve/main"
printf '{"id": "%s", "siblings": [{"rfilename": "README.md"}, {"rfilename": "%s"}]}' "$repo" "$file" \
  > "$work/hub/api/models/$repo/index.json"
cp tests/data/tiny-f32/smollm3-tiny-f32.gguf "$work/hub/$repo/resolve/main/$file"
cat > "$work/hub.py" <<'PY'
import http.server, os, sys
root = sys.argv[1]
class Hub(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k): super().__init__(*a, directory=root, **k)
    def translate_path(self, path):
        local = super().translate_path(path)
        return os.path.join(local, "index.json") if os.path.isdir(local) else local
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$work/hub.py" "$work/hub" > "$work/hub.port" &
hub_pid=$!
for _ in $(seq 50); do [[ -s "$work/hub.port" ]] && break; sleep 0.1; done
hub_port=$(head -n 1 "$work/hub.port")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "==> bash scripts/serve.sh --port $port (hub stand-in on port $hub_port, empty cache)"
SMOL_HF_ENDPOINT="http://127.0.0.1:$hub_port" SMOL_CACHE="$work/cache" bash scripts/serve.sh --port "$port" -t 2 \
  > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log"; echo "serve.sh exited early" >&2; exit 1; }
  sleep 0.5
done
reply=$(curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "temperature": 0}')
echo "$reply" | python3 -c 'import json, sys; r = json.load(sys.stdin); assert r["choices"][0]["message"]["content"] is not None; print("reply:", r["usage"])'
[[ -f "$work/cache/$repo/$file" ]] || { echo "the model was not downloaded into the cache" >&2; exit 1; }
grep -q "http://127.0.0.1:$port" "$work/serve.log" || { echo "serve.sh did not print the URL" >&2; exit 1; }
echo "==> serve.sh fetched the model, printed the URL and served a completion"
