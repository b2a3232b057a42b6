#!/bin/bash
# Two Vireo builds side by side: SET throughput under maxmemory 100mb
# allkeys-lru and without a limit (the load of maxmemory_ab.sh); the limited
# servers are flushed and refilled past the limit before each measured run.
# Usage: bench/maxmemory_build_ab.sh A_BIN B_BIN [ROUNDS]
A=$1; B=$2; ROUNDS=${3:-3}
LOAD="--threads 2 --clients 25 --pipeline 16 --ratio 1:0 --key-space 10000000 --key-pattern uniform --data-size 100 --test-time 5"
$A --port 17521 --save "" >/dev/null 2>&1 &
$A --port 17522 --save "" --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 &
$B --port 17523 --save "" >/dev/null 2>&1 &
$B --port 17524 --save "" --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 &
sleep 1
for p in 17522 17524; do $B bench --port $p $LOAD >/dev/null 2>&1; done
for r in $(seq 1 "$ROUNDS"); do for p in 17521 17522 17523 17524; do
  redis-cli -p $p flushall >/dev/null; [ $p = 17522 -o $p = 17524 ] && $B bench --port $p $LOAD --test-time 2 >/dev/null 2>&1
  echo "$r $p $($B bench --port $p $LOAD 2>&1 | grep -E '^ +replies ' | head -1)"
done; done
for p in 17522 17524; do echo "$p $(redis-cli -p $p info memory | tr -d '\r' | grep -E '^used_memory:') $(redis-cli -p $p info stats | tr -d '\r' | grep '^evicted_keys:')"; done
for p in 17521 17522 17523 17524; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
