#!/bin/bash
# SET throughput under maxmemory 100mb allkeys-lru against no limit, one
# build, pinned: each server on core 0 with one worker, `vireo bench` on
# core 1, so the server does not share its core with the client.
# Usage: bench/maxmemory_pinned.sh BIN [ROUNDS]
B=$1; R=${2:-4}
LOAD="--threads 1 --clients 25 --pipeline 16 --ratio 1:0 --key-space 10000000 --key-pattern uniform --data-size 100 --test-time 5"
taskset -c 0 $B --port 17541 --save "" --threads 1 >/dev/null 2>&1 &
taskset -c 0 $B --port 17542 --save "" --threads 1 --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 &
sleep 1
taskset -c 1 $B bench --port 17542 $LOAD >/dev/null 2>&1
for r in $(seq $R); do for p in 17541 17542; do
  redis-cli -p $p flushall >/dev/null; [ $p = 17542 ] && taskset -c 1 $B bench --port $p $LOAD --test-time 2 >/dev/null 2>&1
  echo "$r $p $(taskset -c 1 $B bench --port $p $LOAD 2>&1 | grep -E '^ +replies ' | head -1)"
done; done
for p in 17541 17542; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
