#!/bin/bash
# Streams beyond redis-benchmark's reach, Vireo vs redis-server:
#   1. bytes per entry: used_memory growth over 1,000,000 XADDs of one
#      small field ("f" "v") to one stream (explicit IDs i-0);
#   2. a consumer-group loop: `vireo bench` (as the client for both
#      servers, alternating rounds, --compare) sends XREADGROUP COUNT 1
#      ... > and XACK of the entries in order, 1:1, on a stream of
#      1,000,000 entries, 50 connections, -P 16.
# MODE=pinned (default): Vireo --threads 1 and Redis on core 0, the client
# on core 1. MODE=all: Vireo's default workers, nothing pinned.
# ROUNDS (3), REQUESTS (200000 per round), V/R ports (17531/17532),
# BENCH_JSON (a file for the consumer loop's `vireo bench --json` figures).
V=${V:-17531}; R=${R:-17532}; ROUNDS=${ROUNDS:-3}; REQUESTS=${REQUESTS:-200000}
MODE=${MODE:-pinned}; BIN=${VIREO:-target/release/vireo}
if [ "$MODE" = pinned ]; then SRV=(taskset -c 0); CLI=(taskset -c 1); THREADS=(--threads 1)
else SRV=(); CLI=(); THREADS=(); fi
"${SRV[@]}" $BIN --port $V --save "" "${THREADS[@]}" >/dev/null 2>&1 &
"${SRV[@]}" redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null
sleep 1
FILL="for i = ARGV[1], ARGV[2] do redis.call('XADD', KEYS[1], i .. '-0', 'f', 'v') end return 1"
fill() { # port key count
  local p=$1 k=$2 n=$3 from=1
  while [ $from -le $n ]; do
    redis-cli -p $p eval "$FILL" 1 $k $from $((from + 99999)) >/dev/null
    from=$((from + 100000))
  done
}
used() { redis-cli -p $1 info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
for p in $V $R; do
  redis-cli -p $p flushall >/dev/null
  before=$(used $p); fill $p entries 1000000; after=$(used $p)
  echo "bytes per entry port $p: $(( (after - before) / 1000000 ))"
  redis-cli -p $p del entries >/dev/null
  fill $p s 1000000
  redis-cli -p $p xgroup create s g 0 >/dev/null
done
"${CLI[@]}" $BIN bench --port $V --compare 127.0.0.1:$R --rounds $ROUNDS --requests $REQUESTS \
  --clients 50 --pipeline 16 --key-pattern seq --key-prefix '' --key-space 1000000 \
  --command 'XREADGROUP GROUP g c COUNT 1 STREAMS s >' --command 'XACK s g __key__-0' -q ${BENCH_JSON:+--json "$BENCH_JSON"}
for p in $V $R; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
wait
