#!/usr/bin/env bash
# SQL databases (REDISQL.*): RediSQL's headline figure and two others, on
# one database key, with redis-benchmark's custom commands.
#
#   1. pipelined REDISQL.EXEC_STATEMENT inserts of ~100 KB rows: MB/s
#      ingested (requests/s x row size);
#   2. small-row inserts/s (an integer and a short text);
#   3. indexed point queries/s (QUERY_STATEMENT by primary key over
#      100,000 rows).
#
# Usage: bench/sql.sh [vireo-binary] [port]
# Env: BIG_N (default 3000), SMALL_N (200000), QUERY_N (200000), PIPE (16),
#      CLIENTS (8). The server runs with persistence off, in a temp dir.
set -euo pipefail
BIN=${1:-target/release/vireo}
PORT=${2:-7399}
BIG_N=${BIG_N:-3000}
SMALL_N=${SMALL_N:-200000}
QUERY_N=${QUERY_N:-200000}
PIPE=${PIPE:-16}
CLIENTS=${CLIENTS:-8}
DIR=$(mktemp -d)
"$BIN" --port "$PORT" --save "" --appendonly no --dir "$DIR" >"$DIR/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$PORT" "$@" >/dev/null; }
cli REDISQL.CREATE_DB db
cli REDISQL.EXEC db "CREATE TABLE big(id INTEGER, data BLOB)"
cli REDISQL.EXEC db "CREATE TABLE small(id INTEGER, name TEXT)"
cli REDISQL.EXEC db "CREATE TABLE point(id INTEGER PRIMARY KEY, name TEXT)"
cli REDISQL.EXEC db "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c LIMIT 100000) INSERT INTO point SELECT i, 'name-' || i FROM c"
cli REDISQL.CREATE_STATEMENT db big "INSERT INTO big VALUES(?1, ?2)"
cli REDISQL.CREATE_STATEMENT db small "INSERT INTO small VALUES(?1, ?2)"
cli REDISQL.CREATE_STATEMENT db get "SELECT name FROM point WHERE id = ?1"
ROW=$(head -c 76800 /dev/urandom | base64 -w0)   # 102,400 bytes of text
rps() { redis-benchmark -p "$PORT" -c "$CLIENTS" -P "$PIPE" -q "$@" | tr '\r' '\n' | awk '/requests per second/ {v=$(NF-5)} END {print v}'; }
big=$(rps -n "$BIG_N" -r 1000000 REDISQL.EXEC_STATEMENT db big __rand_int__ "$ROW")
small=$(rps -n "$SMALL_N" -r 1000000 REDISQL.EXEC_STATEMENT db small __rand_int__ name)
query=$(rps -n "$QUERY_N" -r 100000 REDISQL.QUERY_STATEMENT db get __rand_int__)
rows=$(redis-cli -p "$PORT" REDISQL.QUERY db "SELECT count(*) FROM big" | head -1)
echo "100 KB rows: $big inserts/s = $(awk -v r="$big" -v n="${#ROW}" 'BEGIN {printf "%.0f", r * n / 1e6}') MB/s ($rows rows stored)"
echo "small rows:  $small inserts/s"
echo "point query: $query queries/s (indexed, 100,000 rows)"
echo "(-c $CLIENTS -P $PIPE; $(nproc) cores; $(uptime | sed 's/.*load/load/'))"
