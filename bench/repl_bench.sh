#!/bin/bash
# Replication cost, Vireo against redis-server in the same run (issue 28):
#
# 1. Master throughput: pipelined SETs (redis-benchmark -t set -P $PIPELINE) on
#    a master with 0, 1 and 2 replicas attached, in alternating rounds (for each
#    round and each replica count, Vireo then redis-server); prints requests/s
#    per round and the median. Replication lag must stay bounded: while the
#    benchmark runs the master's master_repl_offset minus each replica's
#    master_repl_offset is sampled twice a second (max lag), and once more when
#    the benchmark ends (end lag) — the median of each is reported, in bytes.
# 2. Full-sync time of $KEYS keys: DEBUG POPULATE on the master, then REPLICAOF
#    on an empty replica, timed until the replica reports master_link_status:up
#    and its DBSIZE equals the master's; rounds alternate the two servers,
#    median reported.
#
#   bench/repl_bench.sh [VIREO_BIN]        # default target/release/vireo
#   ROUNDS=3 KEYS=10000000 REQUESTS=2000000 PIPELINE=16 CLIENTS=50 bench/repl_bench.sh
#   KEYS=200000 REQUESTS=200000 ROUNDS=1 bench/repl_bench.sh   # a quick check
#
# Knobs (environment): ROUNDS (3), KEYS (10000000; 0 skips part 2), REQUESTS
# (2000000; 0 skips part 1), PIPELINE (16), CLIENTS (50), KEYSPACE (random key
# range, 100000), DATA (value size, 64), BASEPORT (17700: six ports from it),
# VIREO_ARGS (extra Vireo options, e.g. "--threads 1"). Every server is
# started here with no persistence and diskless sync without delay, in a
# scratch directory removed at the end. Memory: part 2 holds the keys twice
# per server (master and replica), about 1 GB per million keys for both.
set -u
vireo=${1:-target/release/vireo}
rounds=${ROUNDS:-3}
keys=${KEYS:-10000000}
requests=${REQUESTS:-2000000}
pipeline=${PIPELINE:-16}
clients=${CLIENTS:-50}
keyspace=${KEYSPACE:-100000}
data=${DATA:-64}
base=${BASEPORT:-17700}
command -v redis-server >/dev/null || { echo "redis-server is needed" >&2; exit 1; }
[ -x "$vireo" ] || { echo "no Vireo binary at $vireo" >&2; exit 1; }
work=$(mktemp -d /tmp/repl-bench.XXXXXX)
results=$work/results

# Ports: vireo master, replica, replica; redis master, replica, replica.
declare -A master=([vireo]=$base [redis]=$((base + 3)))
declare -A replicas=([vireo]="$((base + 1)) $((base + 2))" [redis]="$((base + 4)) $((base + 5))")
pids=()

common=(--save "" --appendonly no --repl-diskless-sync yes --repl-diskless-sync-delay 0
  --enable-debug-command yes --protected-mode no)
start() { # KIND PORT
  local dir=$work/$1-$2
  mkdir -p "$dir"
  if [ "$1" = redis ]; then
    redis-server --port "$2" --dir "$dir" "${common[@]}" >"$dir/log" 2>&1 &
  else
    # shellcheck disable=SC2086
    "$vireo" --port "$2" --dir "$dir" "${common[@]}" ${VIREO_ARGS:-} >"$dir/log" 2>&1 &
  fi
  pids+=($!)
}
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

cli() { redis-cli -p "$@"; }
field() { # PORT FIELD: an INFO replication field
  cli "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"
}
now() { date +%s.%N; }
wait_until() { # WHAT COMMAND...: polls every 50 ms, up to 10 minutes
  local what=$1 deadline=$(($(date +%s) + 600))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $what" >&2; exit 1; }
    sleep 0.05
  done
}
link_up() { [ "$(field "$1" master_link_status)" = up ]; }
has_replicas() { [ "$(field "$1" connected_slaves)" = "$2" ]; }
in_sync() { # REPLICA MASTER: same DBSIZE
  [ "$(cli "$1" dbsize)" = "$(cli "$2" dbsize)" ]
}

for kind in vireo redis; do
  start "$kind" "${master[$kind]}"
  for r in ${replicas[$kind]}; do start "$kind" "$r"; done
done
for kind in vireo redis; do
  for p in "${master[$kind]}" ${replicas[$kind]}; do
    wait_until "the server on port $p" cli "$p" ping >/dev/null
  done
done

# Attaches the first N replicas of KIND to its master and detaches the others.
topology() { # KIND N
  local m=${master[$1]} i=0
  for r in ${replicas[$1]}; do
    if [ "$i" -lt "$2" ]; then
      [ "$(field "$r" master_port)" = "$m" ] || cli "$r" replicaof 127.0.0.1 "$m" >/dev/null
    else
      cli "$r" replicaof no one >/dev/null
    fi
    i=$((i + 1))
  done
  wait_until "$2 replicas on $1" has_replicas "$m" "$2"
  i=0
  for r in ${replicas[$1]}; do
    [ "$i" -lt "$2" ] && wait_until "the link of $r" link_up "$r"
    i=$((i + 1))
  done
}

# The largest master offset minus replica offset now, 0 without replicas.
lag() { # KIND N
  local m=${master[$1]} i=0 worst=0 mo ro
  mo=$(field "$m" master_repl_offset)
  for r in ${replicas[$1]}; do
    if [ "$i" -lt "$2" ]; then
      ro=$(field "$r" master_repl_offset)
      [ $((mo - ro)) -gt "$worst" ] && worst=$((mo - ro))
    fi
    i=$((i + 1))
  done
  echo "$worst"
}

throughput() { # KIND N ROUND
  local m=${master[$1]} sampler worst=0 l rps
  topology "$1" "$2"
  cli "$m" flushall >/dev/null
  redis-benchmark -p "$m" -t set -n "$requests" -P "$pipeline" -c "$clients" \
    -r "$keyspace" -d "$data" -q >"$work/bench.out" 2>&1 &
  sampler=$!
  while kill -0 "$sampler" 2>/dev/null; do
    l=$(lag "$1" "$2")
    [ "${l:-0}" -gt "$worst" ] && worst=$l
    sleep 0.5
  done
  wait "$sampler"
  l=$(lag "$1" "$2")
  rps=$(tr '\r' '\n' <"$work/bench.out" | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
  echo "throughput $1 replicas=$2 $rps $worst $l" | tee -a "$results"
}

fullsync() { # KIND ROUND
  local m=${master[$1]} r t0 t1
  r=$(echo ${replicas[$1]} | cut -d' ' -f1)
  topology "$1" 0
  for p in ${replicas[$1]}; do cli "$p" flushall >/dev/null; done
  cli "$m" flushall >/dev/null
  cli "$m" debug populate "$keys" >/dev/null
  t0=$(now)
  cli "$r" replicaof 127.0.0.1 "$m" >/dev/null
  wait_until "the full sync of $1" link_up "$r"
  wait_until "the replica's DBSIZE" in_sync "$r" "$m"
  t1=$(now)
  echo "fullsync $1 keys=$keys $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" |
    tee -a "$results"
  # Free the memory before the other server's round.
  cli "$r" replicaof no one >/dev/null
  cli "$r" flushall >/dev/null
  cli "$m" flushall >/dev/null
}

for round in $(seq "$rounds"); do
  if [ "$requests" -gt 0 ]; then
    for n in 0 1 2; do
      for kind in vireo redis; do throughput "$kind" "$n" "$round"; done
    done
  fi
  if [ "$keys" -gt 0 ]; then
    for kind in vireo redis; do fullsync "$kind" "$round"; done
  fi
done

python3 - "$results" "$rounds" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print()
print("medians of %s round(s)" % sys.argv[2])
tp = {}
for what, kind, cfg, *vals in rows:
    if what == "throughput":
        tp.setdefault((cfg, kind), []).append([float(v) for v in vals])
if tp:
    print("%-11s %-6s %12s %14s %14s" % ("config", "server", "SET/s", "max lag (B)", "end lag (B)"))
    for (cfg, kind), runs in sorted(tp.items(), key=lambda x: (x[0][0], x[0][1] != "vireo")):
        cols = [statistics.median(c) for c in zip(*runs)]
        print("%-11s %-6s %12.0f %14.0f %14.0f" % (cfg, kind, *cols))
fs = {}
for what, kind, cfg, *vals in rows:
    if what == "fullsync":
        fs.setdefault((cfg, kind), []).append(float(vals[0]))
for (cfg, kind), runs in sorted(fs.items(), key=lambda x: x[0][1] != "vireo"):
    print("full sync %s %-6s %8.2f s" % (cfg, kind, statistics.median(runs)))
EOF
