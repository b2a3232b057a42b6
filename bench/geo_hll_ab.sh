#!/bin/bash
# A/B of the GEO and HyperLogLog commands: Vireo (--threads 1) vs
# redis-server, both pinned to core 0, redis-benchmark on core 1,
# alternating rounds (ROUNDS, default 3). Prints "round port test: N
# requests per second" lines; bench/ab_median.py-style medians follow.
#   GEOADD       random positions and members
#   GEOSEARCH    a radius holding exactly the 100 members of one set
#   PFADD        random elements into one HLL
#   PFCOUNT      the union of three dense HLLs (nothing is cached)
# Ports: V (Vireo) and R (redis-server), default 17611 / 17612.
V=${V:-17611}; R=${R:-17612}
ROUNDS=${ROUNDS:-3}
OPTS=(-c 50 -P 16 -q)
taskset -c 0 ${VIREO:-target/release/vireo} --port $V --save "" --threads 1 >/dev/null 2>&1 &
taskset -c 0 redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null
sleep 1

# 100 members within about 10 km of (13.5, 38.5), three HLLs of 100,000
# distinct elements each (dense), overlapping by half.
prepare() {
  local p=$1
  redis-cli -p $p flushall >/dev/null
  for i in $(seq 0 99); do
    echo "GEOADD near $(printf '13.5%02d 38.5%02d' $i $((99 - i))) member:$i"
  done | redis-cli -p $p >/dev/null
  for k in 0 1 2; do
    for chunk in $(seq 0 99); do
      printf 'PFADD hll:%d' $k
      for j in $(seq 0 999); do printf ' e%d' $((k * 50000 + chunk * 1000 + j)); done
      echo
    done | redis-cli -p $p >/dev/null
  done
}

run() {
  local r=$1 p=$2
  prepare $p
  bench() { taskset -c 1 redis-benchmark -p $p "${OPTS[@]}" "$@" 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$r $p /"; }
  bench -n 300000 -r 1000000 GEOADD geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__
  bench -n 50000 GEOSEARCH near FROMLONLAT 13.5 38.5 BYRADIUS 50 km
  bench -n 300000 -r 1000000 PFADD hll e:__rand_int__
  bench -n 50000 PFCOUNT hll:0 hll:1 hll:2
}

for r in $(seq 1 $ROUNDS); do for p in $V $R; do run $r $p; done; done
for p in $V $R; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
wait
