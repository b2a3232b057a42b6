#!/bin/bash
# SET throughput under maxmemory 100mb allkeys-lru against the same server
# without a limit, for Vireo and redis-server; the limited servers are
# filled past the limit first, so every measured round evicts. Prints the
# highest used_memory sampled (INFO, every 0.2 s) during the limited runs.
# Usage: bench/maxmemory_ab.sh [ROUNDS] (VIREO=path overrides the binary)
VIREO=${VIREO:-target/release/vireo}
ROUNDS=${1:-3}
LOAD="--threads 2 --clients 25 --pipeline 16 --ratio 1:0 --key-space 10000000 --key-pattern uniform --data-size 100 --test-time 5"
$VIREO --port 17511 --save "" >/dev/null 2>&1 & V1=$!
$VIREO --port 17512 --save "" --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 & V2=$!
redis-server --port 17513 --save "" --appendonly no >/dev/null 2>&1 & R1=$!
redis-server --port 17514 --save "" --appendonly no --maxmemory 100mb --maxmemory-policy allkeys-lru >/dev/null 2>&1 & R2=$!
sleep 1
for p in 17512 17514; do $VIREO bench --port $p $LOAD >/dev/null 2>&1; done
(while :; do for p in 17512 17514; do echo "$p $(redis-cli -p $p info memory | tr -d '\r' | grep '^used_memory:')"; done; sleep 0.2; done) > /tmp/maxmemory_ab_samples.txt &
S=$!
for r in $(seq 1 "$ROUNDS"); do for p in 17511 17512 17513 17514; do
  echo "$r $p $($VIREO bench --port $p $LOAD 2>&1 | grep -E '^ +replies ' | head -1)"
done; done
kill $S
for p in 17512 17514; do
  echo "$p max $(grep "^$p " /tmp/maxmemory_ab_samples.txt | cut -d: -f2 | sort -n | tail -1) limit 104857600 evicted $(redis-cli -p $p info stats | tr -d '\r' | grep '^evicted_keys:')"
done
kill $V1 $V2 $R1 $R2
