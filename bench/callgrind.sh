#!/bin/bash
# usage: bench/callgrind.sh OUT BIN [redis-benchmark args...]  — runs BIN under callgrind with one thread, drives it, prints worker::run inclusive Ir.
# SERVER_ARGS="--maxmemory 10mb --maxmemory-policy allkeys-lru" adds server options.
OUT=$1; BIN=$2; shift 2
P=$((17000 + RANDOM % 1000))
valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN --port $P --threads 1 --save "" --hz 1 ${SERVER_ARGS:-} > /dev/null 2>&1 &
for i in $(seq 50); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.2; done
# PRELOAD="redis-benchmark args" runs that load first (counted too), e.g. keys for a DEL run.
[ -n "${PRELOAD:-}" ] && redis-benchmark -p $P $PRELOAD -q > /dev/null 2>&1
redis-benchmark -p $P "$@" -q > /dev/null 2>&1
redis-cli -p $P shutdown nosave >/dev/null 2>&1; wait
callgrind_annotate --inclusive=yes $OUT 2>/dev/null | grep -E "worker::run |dispatch::run |PROGRAM TOTALS" | head -3
