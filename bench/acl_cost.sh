#!/bin/bash
# The cost of the ACL check on the command path: a user restricted by key
# patterns against the default user, on the same build.
#
#   bench/acl_cost.sh callgrind BIN [N]        instructions per command in the
#       whole server (callgrind, one worker, pipelined SET/GET, N of each,
#       default 20000, one connection so that the restricted user's AUTH is
#       counted once, not per connection), for the default user and for the
#       restricted user; DISPATCH_ONLY=1 counts inside dispatch::run only
#   bench/acl_cost.sh throughput BIN ROUNDS [redis-benchmark args...]
#       requests/s of the two users in alternating rounds against one server
#       (Vireo on core 0 with one worker, redis-benchmark on core 1); prints
#       each round and the medians. Default load: -t set,get -n 1000000 -P 16
#
# ACL_COST_PORT sets the server's port (default: random in 17000-17999).
#
# The restricted user is the issue's case: all commands, four key patterns
# (three prefixes and a read-only one); redis-benchmark's keys (key:...)
# match the first.
set -u
mode=$1 bin=$2
shift 2
RULES="on >pw +@all ~key:* ~counter:* ~foo* %R~bar*"
start() { # port [valgrind...]
  local p=$1
  shift
  "$@" "$bin" --port "$p" --threads 1 --save "" --hz 1 > /dev/null 2>&1 &
  for _ in $(seq 100); do redis-cli -p "$p" ping > /dev/null 2>&1 && break; sleep 0.2; done
  redis-cli -p "$p" acl setuser bench $RULES > /dev/null
}
case $mode in
callgrind)
  n=${1:-20000}
  for who in default bench; do
    p=${ACL_COST_PORT:-$((17000 + RANDOM % 1000))}
    out=$(mktemp /tmp/acl-cg.XXXXXX)
    toggle=()
    [ "${DISPATCH_ONLY:-0}" = 1 ] && toggle=(--toggle-collect='vireo_server::exec::dispatch::run*')
    start "$p" valgrind --tool=callgrind --callgrind-out-file="$out" "${toggle[@]}"
    auth=()
    [ "$who" = bench ] && auth=(--user bench -a pw)
    # a warm-up round builds the per-command tables, then the measured one
    redis-benchmark -p "$p" "${auth[@]}" -t set,get -n 2000 -P 16 -q > /dev/null 2>&1
    callgrind_control -z "$(pgrep -f "callgrind-out-file=$out")" > /dev/null 2>&1
    redis-benchmark -p "$p" "${auth[@]}" -t set,get -n "$n" -P 16 -c 1 -q > /dev/null 2>&1
    callgrind_control -d "$(pgrep -f "callgrind-out-file=$out")" > /dev/null 2>&1
    redis-cli -p "$p" shutdown nosave > /dev/null 2>&1
    wait
    total=$(callgrind_annotate "$out.1" 2> /dev/null | grep "PROGRAM TOTALS" | awk '{gsub(",", "", $1); print $1}')
    where="the whole server"
    [ ${#toggle[@]} = 0 ] || where="dispatch::run"
    echo "$who: $((total / (2 * n))) instructions per command in $where"
    rm -f "$out" "$out".*
  done
  ;;
throughput)
  rounds=$1
  shift
  load=("$@")
  [ ${#load[@]} = 0 ] && load=(-t set,get -n 1000000 -P 16)
  p=${ACL_COST_PORT:-$((17000 + RANDOM % 1000))}
  start "$p" taskset -c 0
  declare -A all
  for r in $(seq "$rounds"); do
    for who in default bench; do
      auth=()
      [ "$who" = bench ] && auth=(--user bench -a pw)
      rps=$(taskset -c 1 redis-benchmark -p "$p" "${auth[@]}" "${load[@]}" -q 2> /dev/null |
        awk '{for (i = 1; i <= NF; i++) if ($i == "requests") s += $(i - 1)} END {printf "%d", s / NR}')
      all[$who]="${all[$who]:-} $rps"
      echo "round $r $who $rps"
    done
  done
  redis-cli -p "$p" shutdown nosave > /dev/null 2>&1
  wait
  for who in default bench; do
    echo "$who median: $(echo "${all[$who]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}') requests/s"
  done
  ;;
*)
  echo "usage: $0 callgrind|throughput BIN ..." >&2
  exit 2
  ;;
esac
