#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: measures Vireo against Debian's redis-server on
# this machine and rewrites the report's generated blocks (between
# <!-- vireo-report:NAME:begin/end --> markers, and the suite's own), each
# with its date, commit, machine, load and the command that reproduces it:
#
#   suite        throughput, p99 and server CPU per request of each command
#                at -P 1 and -P 16 (bench/suite.sh)
#   memory       bytes per key and per element (bench/bytes_per_key.py,
#                bench/bytes_per_element.py)
#   persistence  SET/s with AOF off/everysec/always, BGSAVE under a write
#                load (bench/persistence.py)
#   maxmemory    SET/s at maxmemory 100mb allkeys-lru vs unlimited
#                (bench/maxmemory_ab.sh)
#   charts       `vireo bench --compare --plot` SVGs in docs/bench/
#   features     scripts, Pub/Sub, streams, GEO/HLL, TLS, the ACL check and
#                SQL (bench/features.sh)
#
# then the summary table at the top from docs/bench/figures.json.
#
#   bench/report.sh                        # everything (~20-25 min on 2 cores)
#   REPORT_ONLY=memory,charts bench/report.sh   # some sections
#   REPORT_QUICK=1 bench/report.sh         # smoke run: small settings, writes
#                                          # target/bench-report/<date>/BENCHMARKS.md
#
# Settings (environment): REPORT_ONLY (comma list of the sections above),
# REPORT_ROUNDS (3), REPORT_SUITE_N requests per suite test (100000),
# REPORT_KEY_SCALE divisor of bytes_per_key's key counts (1),
# REPORT_ELEMENTS per collection (1000000), REPORT_PERSIST_KEYS (10000000),
# REPORT_PERSIST_REQUESTS SETs per AOF run (300000), REPORT_CHART_TIME
# seconds per chart run (5), REPORT_CHART_RATE offered ops/s of the
# open-loop chart (30000), REPORT_WAIT_LOAD (wait until the 1-minute load
# average is below this, polling every 30 s) and REPORT_WAIT_UNTIL (HH:MM
# UTC: stop waiting then), REPORT_BUILD (1; 0 uses the existing
# target/release/vireo), REPORT_MD (BENCHMARKS.md), REPORT_OUT (raw results).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

QUICK=${REPORT_QUICK:-0}
if [[ $QUICK == 1 ]]; then q() { echo "$1"; }; else q() { echo "$2"; }; fi
ROUNDS=${REPORT_ROUNDS:-$(q 2 3)}
SUITE_N=${REPORT_SUITE_N:-$(q 10000 100000)}
KEY_SCALE=${REPORT_KEY_SCALE:-$(q 20 1)}
ELEMENTS=${REPORT_ELEMENTS:-$(q 100000 1000000)}
PERSIST_KEYS=${REPORT_PERSIST_KEYS:-$(q 300000 10000000)}
PERSIST_REQUESTS=${REPORT_PERSIST_REQUESTS:-$(q 50000 300000)}
CHART_TIME=${REPORT_CHART_TIME:-$(q 1 5)}
CHART_RATE=${REPORT_CHART_RATE:-30000}
SECTIONS=${REPORT_ONLY:-suite,memory,persistence,maxmemory,charts,features}
OUT=${REPORT_OUT:-$ROOT/target/bench-report/$(date +%Y%m%d-%H%M%S)}
MD=${REPORT_MD:-$(q "$OUT/BENCHMARKS.md" "$ROOT/BENCHMARKS.md")}
ASSETS=$(dirname "$MD")/docs/bench
FIGURES=$ASSETS/figures.json
mkdir -p "$OUT" "$ASSETS"
if [[ $QUICK == 1 && ! -e $MD ]]; then
    cp "$ROOT/BENCHMARKS.md" "$MD" 2>/dev/null
    cp "$ROOT/docs/bench/figures.json" "$FIGURES" 2>/dev/null
fi

LOG_TAG=report
# shellcheck source=bench/servers.sh
source "$ROOT/bench/servers.sh"
need_tools
pin_cores 0 1
trap cleanup EXIT
trap 'exit 130' INT TERM

VIREO=$ROOT/target/release/vireo
if [[ ${REPORT_BUILD:-1} == 1 ]]; then
    log "building target/release/vireo"
    cargo build --release --bin vireo >"$OUT/build.log" 2>&1 || die "build failed (see $OUT/build.log)"
fi
[[ -x $VIREO ]] || die "no $VIREO: cargo build --release --bin vireo"

load1() { cut -d' ' -f1 /proc/loadavg; }

# Waits, when asked, until the machine is quiet enough to measure.
wait_for_quiet() {
    [[ -n ${REPORT_WAIT_LOAD:-} ]] || return 0
    local deadline=""
    [[ -n ${REPORT_WAIT_UNTIL:-} ]] && deadline=$(date -u -d "$REPORT_WAIT_UNTIL" +%s)
    while awk -v l="$(load1)" -v max="$REPORT_WAIT_LOAD" 'BEGIN {exit !(l >= max)}'; do
        if [[ -n $deadline ]] && (($(date -u +%s) >= deadline)); then
            log "load $(load1) still >= $REPORT_WAIT_LOAD at $REPORT_WAIT_UNTIL UTC; measuring anyway"
            return 0
        fi
        log "load average $(load1) >= $REPORT_WAIT_LOAD; waiting"
        sleep 30
    done
}

# The command that reproduces section $1: the settings it depends on that
# were given, then this script limited to that section.
reproduce() {
    local cmd="REPORT_ONLY=$1" var
    shift
    for var in "${@/#/REPORT_}"; do
        [[ -v $var ]] && cmd+=" $var=${!var}"
    done
    [[ $QUICK == 1 ]] && cmd+=" REPORT_QUICK=1"
    echo "$cmd bench/report.sh"
}

# Environment of report_md.py's section header; the load's highest and
# last values are set at the end.
section_start() {
    export REPORT_DATE REPORT_LOAD_START REPORT_COMMAND
    REPORT_DATE=$(date -u +%Y-%m-%dT%H:%MZ)
    REPORT_LOAD_START=$(load1)
    REPORT_COMMAND=$(reproduce "$@")
    load_watch_start "$OUT/load-$1.txt"
    log "section $1 ($REPORT_COMMAND)"
}

section_end() { # name
    export REPORT_LOAD_MAX REPORT_LOAD_END
    REPORT_LOAD_MAX=$(load_watch_stop "$OUT/load-$1.txt")
    REPORT_LOAD_END=$(load1)
    python3 "$ROOT/bench/report_md.py" section "$1" "$OUT" "$MD" "$FIGURES" ||
        log "warning: section $1 left unchanged"
}

export REPORT_COMMIT REPORT_DIRTY REPORT_CORES REPORT_CPU REPORT_REDIS
REPORT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo none)
REPORT_DIRTY=$(git status --porcelain -- crates Cargo.toml Cargo.lock bench 2>/dev/null | grep -q . && echo yes || echo no)
REPORT_CORES=$(nproc)
REPORT_CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
REPORT_REDIS=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

run_suite() {
    local load_start
    load_start=$(load1)
    SUITE_ROUNDS=$ROUNDS SUITE_N=$SUITE_N SUITE_BUILD=0 SUITE_MD=$MD SUITE_OUT=$OUT/suite \
        "$ROOT/bench/suite.sh" >"$OUT/suite.log" 2>&1 || {
        log "warning: the suite failed (see $OUT/suite.log)"
        return
    }
    python3 "$ROOT/bench/report_md.py" suite "$OUT/suite/summary.json" "$FIGURES"
    log "suite done (load $load_start -> $(load1))"
}

# Starts Vireo and Redis without persistence, unpinned, as vireo-NAME and redis-NAME.
start_pair() { # name pin vireo-args...
    local name=$1 pin=$2
    shift 2
    start_server "vireo-$name" "$pin" "$VIREO" --port @PORT@ --save "" --appendonly no "$@" &&
        start_server "redis-$name" "$pin" redis-server --port @PORT@ --bind 127.0.0.1 \
            --save "" --appendonly no --daemonize no --protected-mode no
}

stop_pair() { stop_server "vireo-$1"; stop_server "redis-$1"; }

run_memory() {
    section_start memory KEY_SCALE ELEMENTS
    local load
    : >"$OUT/memory-keys.md"
    # Each load on fresh servers, so the RSS growth is the load's own.
    for load in 1 2 3; do
        start_pair mem 0 || return
        python3 "$ROOT/bench/bytes_per_key.py" "${PORT[vireo-mem]}" "${PORT[redis-mem]}" \
            "$KEY_SCALE" "$load" | if ((load == 1)); then cat; else tail -n +3; fi \
            >>"$OUT/memory-keys.md"
        stop_pair mem
    done
    start_pair mem 0 || return
    python3 "$ROOT/bench/bytes_per_element.py" "${PORT[vireo-mem]}" "${PORT[redis-mem]}" \
        "$ELEMENTS" >"$OUT/memory-elements.md"
    stop_pair mem
    section_end memory
}

run_persistence() {
    section_start persistence ROUNDS PERSIST_KEYS PERSIST_REQUESTS
    python3 "$ROOT/bench/persistence.py" --vireo "$VIREO" --rounds "$ROUNDS" \
        --keys "$PERSIST_KEYS" --requests "$PERSIST_REQUESTS" >"$OUT/persistence.md" \
        2>"$OUT/persistence.err"
    section_end persistence
}

run_maxmemory() {
    section_start maxmemory ROUNDS
    VIREO=$VIREO "$ROOT/bench/maxmemory_ab.sh" "$ROUNDS" >"$OUT/maxmemory.txt" 2>&1
    section_end maxmemory
}

# chart NAME ARGS...: one `vireo bench --compare` of Vireo (A) and Redis (B).
chart() {
    local name=$1
    shift
    "${PIN_CLIENT[@]}" "$VIREO" bench --port "${PORT[vireo-chart]}" \
        --compare "127.0.0.1:${PORT[redis-chart]}" --rounds "$ROUNDS" --threads 1 \
        --clients 50 --ratio 1:10 --key-pattern zipf:0.99 --key-space 100000 \
        --data-size 64 --preload --test-time "$CHART_TIME" "$@" \
        --plot "$ASSETS/set-get-$name.svg" --json "$OUT/chart-$name.json" \
        >"$OUT/chart-$name.txt" 2>&1
    # The legend names the servers by address; name them by what they are.
    sed -i "s/A 127\.0\.0\.1:${PORT[vireo-chart]}/Vireo/g; s/B 127\.0\.0\.1:${PORT[redis-chart]}/redis-server $REPORT_REDIS/g" \
        "$ASSETS/set-get-$name.svg"
}

run_charts() {
    section_start charts ROUNDS CHART_TIME CHART_RATE
    start_pair chart 1 --threads 1 || return
    chart p16 --pipeline 16 --label "SET:GET 1:10 zipf, -P 16"
    chart rate --pipeline 1 --rate "$CHART_RATE" \
        --label "SET:GET 1:10 zipf, -P 1, $CHART_RATE ops/s offered"
    stop_pair chart
    section_end charts
}

run_features() {
    section_start features ROUNDS
    VIREO=$VIREO ROUNDS=$ROUNDS FEATURES_N=$(q 20000 200000) "$ROOT/bench/features.sh" \
        "$OUT/features" 2>"$OUT/features.log"
    section_end features
}

wait_for_quiet
RUN_LOAD_START=$(load1)
RUN_START=$(date +%s)
log "sections $SECTIONS, $ROUNDS rounds; results in $OUT; report $MD"
for s in suite memory persistence maxmemory charts features; do
    [[ ",$SECTIONS," == *",$s,"* ]] && "run_$s"
done
python3 "$ROOT/bench/report_md.py" summary "$MD" "$FIGURES"
log "done in $((($(date +%s) - RUN_START) / 60)) min; load average $RUN_LOAD_START -> $(load1)"
