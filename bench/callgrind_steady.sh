#!/bin/bash
# usage: bench/callgrind_steady.sh OUT BIN [server args...]
# Runs BIN under callgrind with one worker, loads 1.5M SETs of 100-byte
# values over a 10M key space (past a 100mb limit, into the steady state
# where each SET evicts), zeroes the counters, then counts 1M more SETs.
# Prints the evictions among them; the counts are in OUT.1 (callgrind_annotate).
# e.g. bench/callgrind_steady.sh /tmp/cg target/release/vireo --maxmemory 100mb --maxmemory-policy allkeys-lru
OUT=$1; BIN=$2; shift 2
P=$((18000 + RANDOM % 1000))
valgrind --tool=callgrind --callgrind-out-file="$OUT" "$BIN" --port $P --threads 1 --save "" --hz 1 "$@" > /dev/null 2>&1 &
VP=$!
for _ in $(seq 50); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.2; done
LOAD="-t set -r 10000000 -d 100 -P 16 -c 25 -q"
redis-benchmark -p $P $LOAD -n 1500000 > /dev/null 2>&1
callgrind_control -z $VP > /dev/null 2>&1
evicted() { redis-cli -p $P info stats | tr -d '\r' | grep '^evicted_keys:' | cut -d: -f2; }
E0=$(evicted)
redis-benchmark -p $P $LOAD -n 1000000 > /dev/null 2>&1
E1=$(evicted)
callgrind_control -d $VP > /dev/null 2>&1
redis-cli -p $P shutdown nosave > /dev/null 2>&1; wait
echo "evictions $((E1 - E0)) in 1000000 SETs"
callgrind_annotate "$OUT.1" 2>/dev/null | grep "PROGRAM TOTALS"
