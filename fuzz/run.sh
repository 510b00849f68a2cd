#!/usr/bin/env bash
# Runs one fuzz target for up to RUNS executions or SECONDS of wall clock, whichever comes first,
# and prints the executions libFuzzer reports. Usage: fuzz/run.sh <target> [seconds] [runs]
#
# The door targets keep one Portico running across inputs, so memory the door holds per session
# accumulates (closed MCP sessions once kept their relay tasks); libFuzzer's
# -rss_limit_mb would end the run there. The run is therefore split into rounds of at most
# ROUND_RUNS executions, each a fresh process over the same corpus directory, so coverage carries
# over and only a real crash stops it. KEEP_GOING_ON_TIMEOUT=1 restarts after a timeout as well.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
target="$1"
seconds="${2:-1800}"
runs="${3:-10000000}"
round_runs="${ROUND_RUNS:-$runs}"
max_len="${MAX_LEN:-16384}"
log_dir="${LOG_DIR:-target/logs}"
mkdir -p "$log_dir" "corpus/$target" "artifacts/$target"

start=$(date +%s)
total=0
round=0
while :; do
    now=$(date +%s)
    left=$((seconds - (now - start)))
    todo=$((runs - total))
    if ((left <= 0 || todo <= 0)); then
        break
    fi
    this=$((todo < round_runs ? todo : round_runs))
    round=$((round + 1))
    log="$log_dir/$target.$round.log"
    set +e
    cargo +nightly fuzz run ${FUZZ_FLAGS:-} "$target" "corpus/$target" -- \
        -rss_limit_mb=2048 -max_len="$max_len" -max_total_time="$left" -runs="$this" \
        -print_final_stats=1 -detect_leaks=0 -timeout=30 \
        -artifact_prefix="artifacts/$target/" > "$log" 2>&1
    status=$?
    set -e
    executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [[ -z "$executed" ]]; then
        # Killed before the final stats (a crash or the RSS limit): the last status line says how far.
        executed=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    total=$((total + ${executed:-0}))
    if grep -q 'out-of-memory (used' "$log"; then
        echo "$target round $round: RSS limit after ${executed:-0} executions; restarting" >&2
        continue
    fi
    if [[ -n "${KEEP_GOING_ON_TIMEOUT:-}" ]] && grep -q 'ERROR: libFuzzer: timeout' "$log"; then
        timeouts=$((${timeouts:-0} + 1))
        echo "$target round $round: an input ran past -timeout after ${executed:-0} executions (kept in artifacts/$target/); restarting" >&2
        continue
    fi
    if ((status != 0)); then
        echo "$target round $round: exit $status after ${executed:-0} executions; see $log" >&2
        tail -n 40 "$log" >&2
        echo "$target: $total executions in $(($(date +%s) - start))s, stopped by a failure"
        exit 1
    fi
done
echo "$target: $total executions in $(($(date +%s) - start))s over $round round(s), ${timeouts:-0} timeout(s)"
