# Helpers shared by bench/suite.sh and bench/report.sh (sourced, not run):
# logging, the tools they need, pinning to cores, and servers started on
# free ports and stopped again. The caller sets LOG_TAG and OUT (where the
# servers' logs go) and calls `trap cleanup EXIT` so no server outlives it.

log() { printf '[%s %s] %s\n' "${LOG_TAG:-bench}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Installs redis-server, redis-tools and python3 with apt-get when missing
# (as root); otherwise says what to install and stops.
need_tools() {
    local need_apt=()
    command -v redis-server >/dev/null || need_apt+=(redis-server)
    command -v redis-benchmark >/dev/null || need_apt+=(redis-tools)
    command -v python3 >/dev/null || need_apt+=(python3)
    if ((${#need_apt[@]})); then
        if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
            log "installing ${need_apt[*]} with apt-get"
            apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq "${need_apt[@]}" >/dev/null || die "apt-get install failed"
        else
            die "missing ${need_apt[*]}: apt-get install redis-server redis-tools python3"
        fi
    fi
    command -v timeout >/dev/null || die "timeout (coreutils) is required"
}

# pin_cores SERVER_CPU CLIENT_CPU: sets PIN_SERVER and PIN_CLIENT (command
# prefixes) and PINNING (a sentence for the report); servers and clients go
# to different cores when there are two and taskset exists.
pin_cores() {
    if command -v taskset >/dev/null && (($(nproc) >= 2)); then
        PIN_SERVER=(taskset -c "$1")
        PIN_CLIENT=(taskset -c "$2")
        PINNING="servers on core $1, clients on core $2 (taskset)"
    else
        PIN_SERVER=()
        PIN_CLIENT=()
        PINNING="no pinning (taskset missing or fewer than 2 cores)"
    fi
}

declare -A PORT PID
# A port no one listens on now.
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# wait_ready PORT PID: until the server answers PING (10 s at most).
wait_ready() {
    local i
    for i in $(seq 100); do
        kill -0 "$2" 2>/dev/null || return 1
        [[ $(timeout 2 redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0
        sleep 0.1
    done
    return 1
}

# stop_server NAME: SIGTERM, then SIGKILL after 5 s.
stop_server() {
    local p=${PID[$1]:-}
    [[ -n $p ]] || return 0
    kill "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    unset "PID[$1]"
}

# Stops every server start_server started, and the load sampling.
cleanup() {
    for s in "${!PID[@]}"; do stop_server "$s"; done
    [[ -n ${LOAD_WATCH:-} ]] && kill "$LOAD_WATCH" 2>/dev/null
}

# start_server NAME PIN(0/1) CMD...: starts CMD, pinned to the server core
# when PIN is 1, with @PORT@ in CMD replaced by a free port; on success
# PORT[NAME] and PID[NAME] are set. Its output goes to $OUT/NAME.log.
start_server() {
    local name=$1 pin=$2
    shift 2
    local port
    port=$(free_port)
    local cmd=("$@")
    cmd=("${cmd[@]//@PORT@/$port}")
    if [[ $pin == 1 ]]; then cmd=("${PIN_SERVER[@]}" "${cmd[@]}"); fi
    "${cmd[@]}" >"$OUT/$name.log" 2>&1 &
    local pid=$!
    if wait_ready "$port" "$pid"; then
        PORT[$name]=$port
        PID[$name]=$pid
        log "$name listening on $port (pid $pid)"
        return 0
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    log "$name did not start: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ')"
    return 1
}

# load_watch_start FILE: samples the 1-minute load average into FILE every
# 10 s, so a report can say how busy the machine was during a run.
load_watch_start() {
    [[ -n ${LOAD_WATCH:-} ]] && kill "$LOAD_WATCH" 2>/dev/null
    (while :; do
        cut -d' ' -f1 /proc/loadavg
        sleep 10
    done) >"$1" &
    LOAD_WATCH=$!
}

# load_watch_stop FILE: stops the sampling; prints the highest load sampled.
load_watch_stop() {
    kill "$LOAD_WATCH" 2>/dev/null
    wait "$LOAD_WATCH" 2>/dev/null
    LOAD_WATCH=""
    cut -d' ' -f1 /proc/loadavg >>"$1"
    sort -g "$1" | tail -n 1
}
