#!/usr/bin/env bash
# The capabilities beyond plain keys, Vireo against redis-server in one run:
# each measurement is one of the scripts below, writing its raw output to
# OUT_DIR, where bench/report_md.py's `features` section reads it.
#
#   script-stream-{pinned,all}.txt  EVALSHA (GET+SET, ten commands), XADD,
#                                   XRANGE of 10 (bench/script_stream_ab.sh)
#   pubsub-{pinned,all}.txt         PUBLISH to 1 and 100 subscribers
#                                   (bench/pubsub_ab.py)
#   stream.txt, stream.json         bytes per stream entry, XREADGROUP+XACK
#                                   consumer loop (bench/stream_ab.sh)
#   geo-hll.txt                     GEOADD, GEOSEARCH, PFADD, PFCOUNT
#                                   (bench/geo_hll_ab.sh)
#   tls.txt                         SET/GET over TLS (bench/ab_builds.sh with
#                                   TLS_CERTS; skipped without certificates)
#   acl.txt                         instructions per command of an ACL user
#                                   with key patterns against the default user
#                                   (bench/acl_cost.sh; skipped without valgrind)
#   sql.txt                         REDISQL.* ingest and queries (bench/sql.sh;
#                                   Vireo only: Redis has no SQL)
#
#   bench/features.sh OUT_DIR
#
# Settings (environment): VIREO (target/release/vireo), ROUNDS (3),
# FEATURES_N requests per redis-benchmark test (200000), FEATURES_ONLY (comma
# list of the file stems above, e.g. "pubsub,sql"), TLS_CERTS (a directory
# with ca.crt, server.{crt,key} and client.{crt,key}; default: the suite
# tree's tests/tls under REDIS_SRC, /tmp/redis-src).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
out=${1:?usage: bench/features.sh OUT_DIR}
mkdir -p "$out"
export VIREO=${VIREO:-$ROOT/target/release/vireo} ROUNDS=${ROUNDS:-3}
n=${FEATURES_N:-200000}
only=${FEATURES_ONLY:-script-stream,pubsub,stream,geo-hll,tls,acl,sql}
wanted() { [[ ",$only," == *",$1,"* ]]; }
note() { echo "features: $*" >&2; }

if wanted script-stream; then
    for mode in pinned all; do
        note "scripts and streams ($mode)"
        MODE=$mode N=$n bench/script_stream_ab.sh >"$out/script-stream-$mode.txt" 2>&1
    done
fi
if wanted pubsub; then
    for mode in pinned all; do
        note "Pub/Sub ($mode)"
        MODE=$mode N=$n python3 bench/pubsub_ab.py >"$out/pubsub-$mode.txt" 2>&1
    done
fi
if wanted stream; then
    note "stream entries and the consumer loop"
    REQUESTS=$n BENCH_JSON="$out/stream.json" bench/stream_ab.sh >"$out/stream.txt" 2>&1
fi
if wanted geo-hll; then
    note "GEO and HyperLogLog"
    bench/geo_hll_ab.sh >"$out/geo-hll.txt" 2>&1
fi
if wanted tls; then
    certs=${TLS_CERTS:-${REDIS_SRC:-/tmp/redis-src}/tests/tls}
    if [[ -f $certs/client.crt ]]; then
        note "TLS"
        TLS_CERTS=$certs bench/ab_builds.sh "$ROUNDS" "$VIREO" redis -- \
            -t set,get -n "$n" -P 16 -c 50 -d 64 -r 100000 >"$out/tls.txt" 2>&1
    else
        note "no certificates in $certs: TLS skipped"
    fi
fi
if wanted acl; then
    if command -v valgrind >/dev/null; then
        note "ACL check cost (callgrind)"
        bench/acl_cost.sh callgrind "$VIREO" 20000 >"$out/acl.txt" 2>&1
    else
        note "no valgrind: ACL cost skipped"
    fi
fi
if wanted sql; then
    note "SQL"
    bench/sql.sh "$VIREO" 17399 >"$out/sql.txt" 2>&1
fi
