#!/usr/bin/env bash
# The Vireo benchmark suite: Vireo vs Debian's redis-server vs the null server
# (constant replies: this machine's loopback ceiling), in alternating rounds,
# medians, ratios and server CPU per request written into BENCHMARKS.md
# (bench/report.sh runs it with the report's other measurements):
#
#   bench/suite.sh                          # full run
#   SUITE_N=10000 SUITE_ROUNDS=2 bench/suite.sh   # quick run (a few minutes)
#
# Each round runs redis-benchmark's tests (one invocation per test) and two
# `vireo bench` mixes (SET:GET 1:10 zipf, 1:1 uniform) against each server
# at each pipeline depth; servers are pinned to one core, clients to the
# other; the server order alternates between rounds, data is flushed at each
# server's turn. Then, unless SUITE_SCALING=0, Vireo runs unpinned with 1
# and 2 worker threads against a 2-thread client. Raw output (CSV, JSON,
# logs) stays in SUITE_OUT.
#
# Settings: SUITE_N requests per test (100000), SUITE_ROUNDS (3),
# SUITE_CLIENTS (50), SUITE_DATA value bytes (64), SUITE_KEYSPACE (100000),
# SUITE_PIPELINES ("1 16"), SUITE_TESTS (comma-separated redis-benchmark
# tests), SUITE_TIMEOUT seconds per client invocation (300),
# SUITE_VIREO_ARGS ("--threads 1"; dropped with a note if Vireo rejects
# them), SUITE_THREADS_FLAG ("--threads", for the scaling step),
# SUITE_SCALING (1), SUITE_SERVER_CPU/SUITE_CLIENT_CPU (0/1), SUITE_BUILD
# (1; 0 reuses the binaries), SUITE_VIREO_BIN, SUITE_MD (BENCHMARKS.md),
# SUITE_OUT (target/bench-suite/<date>).
#
# Every client invocation runs under `timeout`, so a server that hangs or
# rejects a command is reported in the table, never waited on forever.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

N=${SUITE_N:-100000}
ROUNDS=${SUITE_ROUNDS:-3}
CLIENTS=${SUITE_CLIENTS:-50}
DATA=${SUITE_DATA:-64}
KEYSPACE=${SUITE_KEYSPACE:-100000}
PIPELINES=${SUITE_PIPELINES:-"1 16"}
TESTS=${SUITE_TESTS:-ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,lrange_300,lrange_600,mset}
TIMEOUT=${SUITE_TIMEOUT:-300}
VIREO_ARGS=${SUITE_VIREO_ARGS:---threads 1}
THREADS_FLAG=${SUITE_THREADS_FLAG:---threads}
SCALING=${SUITE_SCALING:-1}
SERVER_CPU=${SUITE_SERVER_CPU:-0}
CLIENT_CPU=${SUITE_CLIENT_CPU:-1}
BUILD=${SUITE_BUILD:-1}
MD=${SUITE_MD:-$ROOT/BENCHMARKS.md}
OUT=${SUITE_OUT:-$ROOT/target/bench-suite/$(date +%Y%m%d-%H%M%S)}
RAW=$OUT/raw
mkdir -p "$RAW"

# The command line that reproduces this run: the settings given, then the script.
COMMAND=""
for v in N ROUNDS CLIENTS DATA KEYSPACE PIPELINES TESTS TIMEOUT VIREO_ARGS THREADS_FLAG \
    SCALING SERVER_CPU CLIENT_CPU; do
    [[ -v SUITE_$v ]] || continue
    val=${!v}
    [[ $val =~ ^[A-Za-z0-9_,.:/=-]+$ ]] || val="'$val'"
    COMMAND+="SUITE_$v=$val "
done
COMMAND+="bench/suite.sh"
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
START_DATE=$(date -u +%Y-%m-%dT%H:%MZ)

LOG_TAG=suite
# shellcheck source=bench/servers.sh
source "$ROOT/bench/servers.sh"
need_tools
pin_cores "$SERVER_CPU" "$CLIENT_CPU"
load_watch_start "$OUT/load.txt"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -------------------------------------------------------------------
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
VIREO=${SUITE_VIREO_BIN:-$TARGET_DIR/release/vireo}
if [[ $BUILD == 1 ]]; then
    log "building release binaries"
    cargo build --release -p vireo-bench --example bench >"$OUT/build-bench.log" 2>&1 ||
        die "cannot build vireo-bench (see $OUT/build-bench.log)"
    if ! cargo build --release --bin vireo >"$OUT/build-vireo.log" 2>&1; then
        log "warning: cannot build vireo (see $OUT/build-vireo.log); Vireo columns will be empty"
    fi
fi
if "$VIREO" bench --help >/dev/null 2>&1; then
    BENCH=("$VIREO" bench)
elif [[ -x $TARGET_DIR/release/examples/bench ]]; then
    BENCH=("$TARGET_DIR/release/examples/bench")
else
    die "no vireo bench binary: build with cargo build --release -p vireo-bench --example bench"
fi
log "client: ${BENCH[*]}"

# --- servers -----------------------------------------------------------------
SERVERS=()
VIREO_NOTE=""
if [[ -x $VIREO ]]; then
    # shellcheck disable=SC2086
    if start_server vireo 1 "$VIREO" --port @PORT@ --save "" --appendonly no $VIREO_ARGS; then
        SERVERS+=(vireo)
    elif [[ -n $VIREO_ARGS ]] && start_server vireo 1 "$VIREO" --port @PORT@ --save "" --appendonly no; then
        SERVERS+=(vireo)
        VIREO_NOTE="Vireo rejected '$VIREO_ARGS' and ran with its defaults."
        VIREO_ARGS=""
    else
        VIREO_NOTE="Vireo did not start (see vireo.log)."
    fi
else
    VIREO_NOTE="No Vireo binary at $VIREO."
fi
start_server redis 1 redis-server --port @PORT@ --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no --protected-mode no || die "redis-server did not start"
SERVERS+=(redis)
start_server null 1 "${BENCH[@]}" --null-server --port @PORT@ --threads 1 --data-size "$DATA" ||
    die "the null server did not start"

# --- one measurement ---------------------------------------------------------
# Each writes its output under $RAW/<round>/<server>/ as NAME.{out,err,rc,cpu}.

# Nanoseconds all threads of process $1 have spent on a CPU so far.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }

# measured FILE SERVER CMD...: runs the client CMD and writes FILE.cpu as
# "<server CPU s> <wall s>": how busy the server was during the run. (The
# client's own CPU time is not recorded: on these VMs rusage charges tens of
# ms to every short-lived process, more than a 0.1 s run's wall time.)
measured() {
    local f=$1 server=$2 before after start end rc
    shift 2
    before=$(cpu_ns "${PID[$server]}")
    start=$(date +%s%N)
    "$@" >"$f.out" 2>"$f.err" </dev/null
    rc=$?
    end=$(date +%s%N)
    after=$(cpu_ns "${PID[$server]}")
    awk -v s=$((after - before)) -v w=$((end - start)) \
        'BEGIN {printf "%.4f %.4f\n", s / 1e9, w / 1e9}' >"$f.cpu"
    return $rc
}

run_rb() { # round server pipeline test
    local dir=$RAW/$1/$2
    mkdir -p "$dir"
    local f=$dir/rb-P$3-$4
    measured "$f" "$2" timeout -k 5 "$TIMEOUT" "${PIN_CLIENT[@]}" redis-benchmark \
        -p "${PORT[$2]}" -t "$4" -n "$N" -c "$CLIENTS" -d "$DATA" -r "$KEYSPACE" -P "$3" --csv
    echo $? >"$f.rc"
}

run_vb() { # round server pipeline workload
    local dir=$RAW/$1/$2
    mkdir -p "$dir"
    local f=$dir/vb-P$3-$4 wl
    case $4 in
    zipf) wl=(--ratio 1:10 --key-pattern zipf:0.99) ;;
    uniform) wl=(--ratio 1:1 --key-pattern uniform) ;;
    esac
    measured "$f" "$2" timeout -k 5 "$TIMEOUT" "${PIN_CLIENT[@]}" "${BENCH[@]}" \
        --port "${PORT[$2]}" "${wl[@]}" --requests "$N" --threads 1 --clients "$CLIENTS" \
        --pipeline "$3" --data-size "$DATA" --key-space "$KEYSPACE" --timeout 10 --quiet \
        --json "$f.json"
    echo $? >"$f.rc"
}

IFS=, read -r -a TEST_LIST <<<"$TESTS"
NULL_TESTS=("${TEST_LIST[@]}")

log "settings: N=$N rounds=$ROUNDS clients=$CLIENTS data=$DATA keyspace=$KEYSPACE pipelines='$PIPELINES'"
log "results in $OUT"
for ((r = 1; r <= ROUNDS; r++)); do
    # Alternate the order (A B, then B A) so slow drift of the machine
    # does not favour whichever server always runs first.
    order=("${SERVERS[@]}")
    if ((r % 2 == 0)); then
        order=()
        for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do order+=("${SERVERS[i]}"); done
    fi
    order+=(null)
    log "round $r/$ROUNDS: ${order[*]}"
    for s in "${order[@]}"; do
        [[ $s == null ]] || timeout 10 redis-cli -p "${PORT[$s]}" flushall >/dev/null 2>&1
        for p in $PIPELINES; do
            tests=("${TEST_LIST[@]}")
            [[ $s == null ]] && tests=("${NULL_TESTS[@]}")
            for t in "${tests[@]}"; do run_rb "$r" "$s" "$p" "$t"; done
            for w in zipf uniform; do run_vb "$r" "$s" "$p" "$w"; done
        done
    done
done

# --- scaling: 2 worker threads vs 1, unpinned ------------------------------------
if [[ $SCALING == 1 && -x $VIREO && " ${SERVERS[*]} " == *" vireo "* ]]; then
    stop_server vireo
    for ((r = 1; r <= ROUNDS; r++)); do
        for th in 1 2; do
            if start_server "vireo-t$th" 0 "$VIREO" --port @PORT@ --save "" --appendonly no "$THREADS_FLAG" "$th"; then
                dir=$RAW/$r/vireo-t$th
                mkdir -p "$dir"
                f=$dir/vb-P16-zipf-scaling
                timeout -k 5 "$TIMEOUT" "${BENCH[@]}" --port "${PORT[vireo-t$th]}" --ratio 1:10 \
                    --key-pattern zipf:0.99 --requests "$N" --threads 2 --clients $((CLIENTS / 2)) \
                    --pipeline 16 --data-size "$DATA" --key-space "$KEYSPACE" --quiet \
                    --json "$f.json" >"$f.out" 2>"$f.err" </dev/null
                echo $? >"$f.rc"
                stop_server "vireo-t$th"
            fi
        done
    done
fi

# --- report --------------------------------------------------------------------
LOAD_MAX=$(load_watch_stop "$OUT/load.txt")
# Changes to the report itself do not change what was measured.
DIRTY=$(git -C "$ROOT" status --porcelain -- crates Cargo.toml Cargo.lock bench 2>/dev/null |
    grep -q . && echo yes || echo no)
cat >"$OUT/meta.env" <<EOF
N=$N
ROUNDS=$ROUNDS
CLIENTS=$CLIENTS
DATA=$DATA
KEYSPACE=$KEYSPACE
PIPELINES=$PIPELINES
PINNING=$PINNING
VIREO_ARGS=$VIREO_ARGS
VIREO_NOTE=$VIREO_NOTE
COMMAND=$COMMAND
LOAD_START=$LOAD_START
LOAD_MAX=$LOAD_MAX
LOAD_END=$(cut -d' ' -f1 /proc/loadavg)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)
DIRTY=$DIRTY
REDIS=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
CORES=$(nproc)
DATE=$START_DATE
EOF
python3 "$ROOT/bench/suite_report.py" "$OUT" "$MD" || die "report failed"
log "table written to $MD (raw results in $OUT)"
