#!/bin/bash
# One build or several side by side, pinned (each server one worker on
# core 0, `vireo bench` on core 1, so the server does not share its core
# with the client): per round and build, SET
# throughput without a limit, then under maxmemory 100mb allkeys-lru
# (refilled past the limit first), and their ratio. Rounds alternate the
# builds, so drift in the machine's speed hits all of them alike.
# With FILL=1 the unlimited servers are filled with all 10M keys once and
# never flushed, so their SETs overwrite (the load's steady state without
# a limit) instead of growing the keyspace from empty each round.
# With PIN=0 nothing is pinned: the servers run their default workers
# (one per core) and the client two threads, all sharing the cores.
# Usage: [FILL=1] [PIN=0] bench/maxmemory_pinned_ab.sh ROUNDS BIN...
R=$1; shift
if [ "${PIN:-1}" = 1 ]; then
  SERVER_CPU="taskset -c 0"; CLIENT_CPU="taskset -c 1"; WORKERS="--threads 1"; CLIENTS=1
else
  SERVER_CPU=""; CLIENT_CPU=""; WORKERS=""; CLIENTS=2
fi
KEYS="--clients 25 --pipeline 16 --ratio 1:0 --key-space 10000000 --data-size 100"
LOAD="--threads $CLIENTS $KEYS --key-pattern uniform"
port=17550
for b in "$@"; do
  $SERVER_CPU "$b" --port $port --save "" $WORKERS >/dev/null 2>&1 &
  $SERVER_CPU "$b" --port $((port + 1)) --save "" $WORKERS --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 &
  port=$((port + 2))
done
sleep 1
if [ "${FILL:-0}" = 1 ]; then
  port=17550
  for b in "$@"; do
    $CLIENT_CPU "$b" bench --port $port --threads $CLIENTS $KEYS --key-pattern seq --requests 10000000 >/dev/null 2>&1
    port=$((port + 2))
  done
fi
rate() { $CLIENT_CPU "$1" bench --port "$2" $LOAD --test-time "$3" 2>&1 | grep -E '^ +replies ' | head -1 | awk '{gsub(",", "", $(NF-1)); print $(NF-1)}'; }
for r in $(seq "$R"); do
  port=17550
  for b in "$@"; do
    [ "${FILL:-0}" = 1 ] || redis-cli -p $port flushall >/dev/null
    unl=$(rate "$b" $port 5)
    redis-cli -p $((port + 1)) flushall >/dev/null
    rate "$b" $((port + 1)) 3 >/dev/null
    lim=$(rate "$b" $((port + 1)) 5)
    echo "$r $b unlimited $unl limited $lim ratio $(echo "scale=3; $lim / $unl" | bc)"
    port=$((port + 2))
  done
done
port=17550
for b in "$@"; do
  redis-cli -p $port shutdown nosave >/dev/null 2>&1
  redis-cli -p $((port + 1)) shutdown nosave >/dev/null 2>&1
  port=$((port + 2))
done
