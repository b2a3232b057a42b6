#!/bin/bash
# GET over a big keyspace (about 3.5M keys of 64 bytes), two Vireo builds
# pinned on core 0 with one worker each, redis-benchmark on core 1, in
# alternating rounds. Usage: bench/big_get_ab.sh A_BIN B_BIN [ROUNDS]
A=$1; B=$2; R=${3:-5}
taskset -c 0 $A --port 17801 --save "" --threads 1 >/dev/null 2>&1 &
taskset -c 0 $B --port 17802 --save "" --threads 1 >/dev/null 2>&1 &
sleep 1
for p in 17801 17802; do taskset -c 1 redis-benchmark -p $p -t set -n 6000000 -r 5000000 -d 64 -P 64 -c 20 -q >/dev/null 2>&1; echo "$p keys $(redis-cli -p $p dbsize)"; done
for r in $(seq $R); do for p in 17801 17802; do
  echo "$r $p $(taskset -c 1 redis-benchmark -p $p -t get -n 3000000 -r 5000000 -P 16 -c 50 -q 2>/dev/null | grep -oE 'GET: [0-9.]+' )"
done; done
for p in 17801 17802; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
