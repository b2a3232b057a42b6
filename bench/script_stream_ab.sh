#!/bin/bash
# A/B of scripts and streams: Vireo vs redis-server, alternating rounds
# (ROUNDS, default 3), redis-benchmark with 50 clients and -P 16.
#   MODE=pinned (default): Vireo --threads 1 and Redis on core 0, the
#     client on core 1: work per request on one core each.
#   MODE=all: Vireo with its default workers (one per core), nothing
#     pinned: what each server does with the whole machine.
# Rows:
#   EVALSHA get+set   a script doing one GET and one SET of a random key
#   EVALSHA 10 cmds   a script doing five GET/SET pairs on its key
#   XADD              appends to one of 100 streams
#   XRANGE 10         the first ten entries of a 1,000-entry stream
# Prints "round port test: N requests per second" lines; feed them to
# bench/ab_median.py (with V/R ports 17501/17502) for medians.
V=${V:-17501}; R=${R:-17502}
ROUNDS=${ROUNDS:-3}; N=${N:-300000}; MODE=${MODE:-pinned}
OPTS=(-c 50 -P 16 -q)
if [ "$MODE" = pinned ]; then SRV=(taskset -c 0); CLI=(taskset -c 1); THREADS=(--threads 1)
else SRV=(); CLI=(); THREADS=(); fi
"${SRV[@]}" ${VIREO:-target/release/vireo} --port $V --save "" "${THREADS[@]}" >/dev/null 2>&1 &
"${SRV[@]}" redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null
sleep 1

GETSET="redis.call('GET', KEYS[1]) return redis.call('SET', KEYS[1], ARGV[1])"
TEN="for i = 1, 5 do redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], ARGV[1]) end return 1"

prepare() {
  local p=$1
  redis-cli -p $p flushall >/dev/null
  redis-cli -p $p script load "$GETSET" >/dev/null
  redis-cli -p $p script load "$TEN" >/dev/null
  for i in $(seq 1 1000); do echo "XADD range * field value:$i"; done | redis-cli -p $p >/dev/null
}

run() {
  local r=$1 p=$2 sha1 sha10
  prepare $p
  sha1=$(redis-cli -p $p script load "$GETSET"); sha10=$(redis-cli -p $p script load "$TEN")
  bench() { "${CLI[@]}" redis-benchmark -p $p "${OPTS[@]}" "$@" 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$r $p /"; }
  bench -n $N -r 100000 evalsha $sha1 1 key:__rand_int__ value | sed 's/evalsha.*: \([0-9.]* requests\)/EVALSHA get+set: \1/'
  bench -n $((N / 4)) -r 100000 evalsha $sha10 1 key:__rand_int__ value | sed 's/evalsha.*: \([0-9.]* requests\)/EVALSHA 10 cmds: \1/'
  bench -n $N -r 100 xadd stream:__rand_int__ '*' field value | sed 's/xadd.*: \([0-9.]* requests\)/XADD: \1/'
  bench -n $N xrange range - + COUNT 10 | sed 's/xrange.*: \([0-9.]* requests\)/XRANGE 10: \1/'
}

for r in $(seq 1 $ROUNDS); do for p in $V $R; do run $r $p; done; done
for p in $V $R; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
wait
