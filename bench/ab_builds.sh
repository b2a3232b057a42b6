#!/bin/bash
# A/B/C… of several server builds (and redis-server) under one redis-benchmark load,
# in alternating rounds; prints each server's requests/s (thousands) per round and the median.
#
#   bench/ab_builds.sh ROUNDS BIN_OR_redis... -- REDIS_BENCHMARK_ARGS...
#   bench/ab_builds.sh 5 /tmp/vireo-old target/release/vireo redis -- -t set,get -n 2000000 -P 16 -c 50 -d 64 -r 100000
#
# By default every server runs on core 0 (Vireo with --threads 1) and redis-benchmark on core 1.
# UNPINNED=1 runs everything unpinned and Vireo with its default threads.
# TLS_CERTS=DIR has every server listen on a TLS port only and redis-benchmark
# speak TLS, authenticating with DIR/client.crt (DIR holds ca.crt, server.{crt,key}
# and client.{crt,key}, e.g. made by Redis's utils/gen-test-certs.sh run in a
# scratch copy: it writes tests/tls/ under the current directory).
# Builds are told apart by their path; copy them to distinct names first.
set -u
rounds=$1
shift
servers=()
while [ "$1" != "--" ]; do
  servers+=("$1")
  shift
done
shift
if [ "${UNPINNED:-0}" = 1 ]; then
  server_pin=() client_pin=() vireo_args=()
else
  server_pin=(taskset -c 0) client_pin=(taskset -c 1) vireo_args=(--threads 1)
fi
listen=(--port PORT) client=()
if [ -n "${TLS_CERTS:-}" ]; then
  c=$TLS_CERTS
  listen=(--port 0 --tls-port PORT --tls-cert-file "$c/server.crt" --tls-key-file "$c/server.key"
    --tls-ca-cert-file "$c/ca.crt")
  client=(--tls --cacert "$c/ca.crt" --cert "$c/client.crt" --key "$c/client.key")
fi
port=$((17600 + RANDOM % 200))
ports=()
for s in "${servers[@]}"; do
  args=("${listen[@]/PORT/$port}" --save "" --appendonly no)
  if [ "$s" = redis ]; then
    "${server_pin[@]}" redis-server "${args[@]}" --daemonize yes >/dev/null
  else
    "${server_pin[@]}" "$s" "${args[@]}" "${vireo_args[@]}" >/dev/null 2>&1 &
  fi
  ports+=($port)
  port=$((port + 1))
done
sleep 1
for r in $(seq "$rounds"); do
  for i in "${!ports[@]}"; do
    p=${ports[$i]}
    redis-cli "${client[@]}" -p "$p" flushall >/dev/null
    "${client_pin[@]}" redis-benchmark "${client[@]}" -p "$p" "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" |
      sed 's/ (.*keys)//' | awk -v s="${servers[$i]}" '{print s, $1, int($2 / 1000)}'
  done
done | python3 -c '
import sys, statistics
runs = {}
for line in sys.stdin:
    server, test, kops = line.split()
    runs.setdefault((test, server), []).append(int(kops))
for (test, server), v in sorted(runs.items()):
    print("%-12s %-36s median %5d   rounds %s" % (test, server, statistics.median(v), " ".join(map(str, v))))
'
for p in "${ports[@]}"; do redis-cli "${client[@]}" -p "$p" shutdown nosave >/dev/null 2>&1; done
wait # the Vireo servers have let go of their ports before the next run
