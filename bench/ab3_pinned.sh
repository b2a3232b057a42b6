#!/bin/bash
# 3-way pinned A/B: base Vireo, new Vireo (both --threads 1) and redis-server on core 0; redis-benchmark on core 1; alternating rounds.
B=17601; N=17602; R=17603
taskset -c 0 $BASE --port $B --save "" --threads 1 >/dev/null 2>&1 &
taskset -c 0 $NEW --port $N --save "" --threads 1 >/dev/null 2>&1 &
taskset -c 0 redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null; sleep 1
for r in 1 2 3; do for s in $B $N $R; do
  redis-cli -p $s flushall >/dev/null
  taskset -c 1 redis-benchmark -p $s "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$r $s /"
done; done
for s in $B $N $R; do redis-cli -p $s shutdown nosave >/dev/null 2>&1; done
