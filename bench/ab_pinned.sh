#!/bin/bash
# A/B: Vireo (--threads 1) vs redis-server, both pinned to core 0, redis-benchmark on core 1, alternating rounds.
# With BASE=<another vireo binary> a third server (e.g. an older build) joins the rounds on port 17500.
V=17501; R=17502; B=17500
servers="$V $R"
taskset -c 0 ${VIREO:-target/release/vireo} --port $V --save "" --threads 1 >/dev/null 2>&1 &
if [ -n "$BASE" ]; then
  taskset -c 0 $BASE --port $B --save "" --threads 1 >/dev/null 2>&1 &
  servers="$B $V $R"
fi
taskset -c 0 redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null; sleep 1
for r in 1 2 3; do for s in $servers; do
  redis-cli -p $s flushall >/dev/null
  taskset -c 1 redis-benchmark -p $s "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$r $s /"
done; done
for s in $servers; do redis-cli -p $s shutdown nosave >/dev/null 2>&1; done
wait  # the Vireo servers have let go of their ports before the next run
