#!/bin/bash
# usage: bench/callgrind_evalsha.sh OUT BIN [server args]: runs BIN (Vireo with --threads 1 --hz 1, or
# redis-server) under callgrind, sends N (20000) EVALSHA of a script with
# redis-benchmark -P 16, prints the total instructions (divide by N for one call).
# SCRIPT=getset (default): GET + SET of one key; SCRIPT=ten: 5 GET + 5 SET (the
# scripts of bench/script_stream_ab.sh). PORT: the server's port (default: random in 18000-18999).
OUT=$1; BIN=$2; shift 2
P=${PORT:-$((18000 + RANDOM % 1000))}
case ${SCRIPT:-getset} in
  getset) S="redis.call('GET', KEYS[1]) return redis.call('SET', KEYS[1], ARGV[1])" ;;
  ten) S="for i = 1, 5 do redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], ARGV[1]) end return 1" ;;
  *) echo "SCRIPT must be getset or ten" >&2; exit 2 ;;
esac
valgrind --tool=callgrind --callgrind-out-file=$OUT $BIN --port $P --save "" "$@" > /dev/null 2>&1 &
for i in $(seq 100); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.2; done
SHA=$(redis-cli -p $P script load "$S")
redis-benchmark -p $P -c 50 -P 16 -n ${N:-20000} -r 100000 evalsha $SHA 1 key:__rand_int__ value -q > /dev/null 2>&1
redis-cli -p $P shutdown nosave >/dev/null 2>&1; wait
callgrind_annotate $OUT 2>/dev/null | grep -E "PROGRAM TOTALS"
