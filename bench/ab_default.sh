#!/bin/bash
# A/B with defaults: Vireo (one worker per core) vs redis-server, nothing pinned, alternating rounds.
V=17501; R=17502
${VIREO:-target/release/vireo} --port $V --save "" >/dev/null 2>&1 &
redis-server --port $R --save "" --appendonly no --daemonize yes >/dev/null; sleep 1
for r in 1 2 3; do for s in $V $R; do
  redis-cli -p $s flushall >/dev/null
  redis-benchmark -p $s "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$r $s /"
done; done
redis-cli -p $V shutdown nosave >/dev/null 2>&1; redis-cli -p $R shutdown nosave >/dev/null 2>&1
