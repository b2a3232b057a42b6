#!/bin/bash
# TLS throughput: Vireo builds and redis-server, each listening on a TLS port only,
# driven by `redis-benchmark --tls` in alternating rounds; prints requests/s
# (thousands) per round and the median, as bench/ab_builds.sh does for plaintext.
#
#   bench/tls_ab.sh CERT_DIR ROUNDS BIN_OR_redis... -- REDIS_BENCHMARK_ARGS...
#   bench/tls_ab.sh /tmp/certs 5 target/release/vireo redis -- -t set,get -n 200000 -P 16 -c 50
#
# CERT_DIR holds ca.crt, server.{crt,key} and client.{crt,key}, e.g. made by Redis's
# utils/gen-test-certs.sh (run in a scratch copy: it writes tests/tls/ under the
# current directory). Clients authenticate with client.crt (tls-auth-clients yes).
# By default every server runs on core 0 (Vireo with --threads 1) and redis-benchmark
# on core 1; UNPINNED=1 runs everything unpinned and Vireo with its default threads.
set -u
certs=$1 rounds=$2
shift 2
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
tls_server=(--port 0 --tls-port PORT --tls-cert-file "$certs/server.crt" --tls-key-file "$certs/server.key"
  --tls-ca-cert-file "$certs/ca.crt" --save "" --appendonly no)
tls_client=(--tls --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key")
port=$((17800 + RANDOM % 200))
ports=()
for s in "${servers[@]}"; do
  args=("${tls_server[@]/PORT/$port}")
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
    redis-cli "${tls_client[@]}" -p "$p" flushall >/dev/null
    "${client_pin[@]}" redis-benchmark "${tls_client[@]}" -p "$p" "$@" -q 2>&1 | tr '\r' '\n' |
      grep "requests per second" | sed 's/ (.*keys)//' |
      awk -v s="${servers[$i]}" '{print s, $1, int($2 / 1000)}'
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
for p in "${ports[@]}"; do redis-cli "${tls_client[@]}" -p "$p" shutdown nosave >/dev/null 2>&1; done
wait # the Vireo servers have let go of their ports before the next run
