#!/usr/bin/env python3
"""Bytes per element of 1M-element collections: used_memory delta (INFO
memory) after filling one list, hash, set and sorted set, on Vireo and on
redis-server. Usage: bench/bytes_per_element.py VIREO_PORT REDIS_PORT [N]"""
import subprocess, sys

def used(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"], capture_output=True, text=True).stdout
    return int(next(l for l in out.splitlines() if l.startswith("used_memory:")).split(":")[1])

def resp(*args):
    return ("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode()

def fill(port, kind, n):
    batch = 1000
    cmds = []
    for i in range(0, n, batch):
        items = ["element:%07d" % j for j in range(i, min(n, i + batch))]
        if kind == "list":
            cmds.append(resp("RPUSH", "k", *items))
        elif kind == "set":
            cmds.append(resp("SADD", "k", *items))
        elif kind == "hash":
            cmds.append(resp("HSET", "k", *[x for it in items for x in (it, "v")]))
        else:
            cmds.append(resp("ZADD", "k", *[x for j, it in enumerate(items) for x in (str(i + j), it)]))
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=b"".join(cmds), capture_output=True)

n = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
print("| type | Vireo B/elem | Redis B/elem | Vireo/Redis |\n|---|---|---|---|")
for kind in ["list", "hash", "set", "zset"]:
    res = []
    for port in sys.argv[1:3]:
        subprocess.run(["redis-cli", "-p", port, "flushall"], capture_output=True)
        before = used(port)
        fill(port, kind, n)
        res.append((used(port) - before) / n)
    print("| %s | %.1f | %.1f | %.2f |" % (kind, res[0], res[1], res[0] / res[1]))
