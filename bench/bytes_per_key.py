#!/usr/bin/env python3
"""Bytes per key: used_memory delta (INFO memory) / keys after loading
 - 1M keys with 16-byte names and 64-byte values, without and with a TTL,
 - 10M keys whose names and values are 8-digit integers,
on Vireo and on redis-server, plus the RSS delta.
Usage: bench/bytes_per_key.py VIREO_PORT REDIS_PORT [SCALE [CASES]]
(SCALE divides the key counts, for a quick run; CASES, e.g. 2 or 1,3,
picks loads by number. The RSS delta means something only for the first
load after a server starts: freed memory stays with the process, so
bench/report.sh runs each load on fresh servers.)"""
import subprocess, sys

def info(port, field):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"], capture_output=True, text=True).stdout
    return int(next(l for l in out.splitlines() if l.startswith(field + ":")).split(":")[1])

def resp(*args):
    return ("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode()

def load(port, n, make):
    chunk = 100_000
    for start in range(0, n, chunk):
        cmds = b"".join(make(i) for i in range(start, min(n, start + chunk)))
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=cmds, capture_output=True)

value = "v" * 64
cases = [
    ("1M keys, 16 B names, 64 B values", 1_000_000, lambda i: resp("SET", "key:%012d" % i, value)),
    ("same with a TTL", 1_000_000, lambda i: resp("SET", "key:%012d" % i, value, "EX", "100000")),
    ("10M keys, 8-digit integer names and values", 10_000_000, lambda i: resp("SET", "%08d" % i, "%08d" % (i + 10_000_000))),
]
scale = int(sys.argv[3]) if len(sys.argv) > 3 else 1
if len(sys.argv) > 4:
    cases = [cases[int(i) - 1] for i in sys.argv[4].split(",")]
print("| load | Vireo B/key | Redis B/key | Vireo/Redis | Vireo RSS B/key | Redis RSS B/key |\n|---|---|---|---|---|---|")
for name, n, make in cases:
    n //= scale
    res = []
    for port in sys.argv[1:3]:
        subprocess.run(["redis-cli", "-p", port, "flushall"], capture_output=True)
        before, rss_before = info(port, "used_memory"), info(port, "used_memory_rss")
        load(port, n, make)
        keys = int(subprocess.run(["redis-cli", "-p", port, "dbsize"], capture_output=True, text=True).stdout)
        assert keys == n, (port, keys, n)
        res.append(((info(port, "used_memory") - before) / n, (info(port, "used_memory_rss") - rss_before) / n))
    print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f |" % (name, res[0][0], res[1][0], res[0][0] / res[1][0], res[0][1], res[1][1]))
