#!/usr/bin/env python3
"""Issue 5's persistence figures, Vireo against Debian's redis-server.

1. AOF: SET throughput with appendonly off, appendfsync everysec and
   appendfsync always, for both servers, alternating rounds; medians.
2. A dataset of N keys (default 10M) written into redis-server with the
   key names redis-benchmark's -r uses (key:000000000042) and 16-byte
   values, and saved; both servers start on a copy of that file: start-up
   load time (until PING stops answering -LOADING).
3. BGSAVE of that dataset while a redis-benchmark SET load overwrites its
   keys with values of the same size (so the load alone does not grow
   memory): the save's duration, peak RSS over the RSS before (for Redis,
   parent plus fork child, which is what the machine pays), and write
   throughput during the save against the throughput just before it (from
   INFO's command count).

Usage: bench/persistence.py [--keys N] [--rounds R] [--vireo PATH]
                            [--skip-aof] [--skip-bgsave]
Prints Markdown tables.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args],
                         capture_output=True, text=True, timeout=600)
    return out.stdout.strip()


def info(port, section="everything"):
    fields = {}
    for line in cli(port, "INFO", section).splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k] = v
    return fields


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def private_kib(pid):
    """Memory a process does not share (a fork child's copied pages)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except OSError:  # the child just exited
        pass
    return total


def children(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]
    except (OSError, ValueError):
        return []


class ServerProc:
    """A server process in its own directory."""

    def __init__(self, kind, vireo, workdir, extra):
        self.kind = kind
        self.port = free_port()
        self.dir = workdir
        if kind == "vireo":
            cmd = [vireo, "--port", str(self.port), "--bind", "127.0.0.1",
                   "--dir", workdir, "--save", ""]
        else:
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--dir", workdir, "--save", "", "--appendonly", "no",
                   "--enable-debug-command", "yes"]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd + extra, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    def wait_ready(self):
        while True:
            try:
                reply = cli(self.port, "PING")
            except subprocess.TimeoutExpired:
                reply = ""
            if reply == "PONG":
                return time.monotonic() - self.started
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited")
            time.sleep(0.02)

    def stop(self):
        cli(self.port, "SHUTDOWN", "NOSAVE")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def benchmark_set(port, n, keyspace):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(n), "-c", "50",
         "-P", "16", "-d", "64", "-r", str(keyspace), "-q"],
        capture_output=True, text=True)
    for part in out.stdout.replace("\r", "\n").splitlines():
        if "requests per second" in part:
            return float(part.split(":")[1].split()[0].replace(",", ""))
    raise RuntimeError(out.stdout + out.stderr)


def aof_table(vireo, rounds, n):
    modes = [("off", ["--appendonly", "no"]),
             ("everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
             ("always", ["--appendonly", "yes", "--appendfsync", "always"])]
    results = {}
    for name, extra in modes:
        for kind in ("vireo", "redis"):
            results[(name, kind)] = []
    for _ in range(rounds):
        for name, extra in modes:
            for kind in ("vireo", "redis"):
                d = tempfile.mkdtemp(prefix="vireo-persist-")
                s = ServerProc(kind, vireo, d, extra)
                s.wait_ready()
                results[(name, kind)].append(benchmark_set(s.port, n, 100000))
                s.stop()
                shutil.rmtree(d, ignore_errors=True)
    print("| appendfsync | Vireo SET/s | Redis SET/s | Vireo/Redis | Vireo vs its own 'off' |")
    print("|---|---|---|---|---|")
    off = statistics.median(results[("off", "vireo")])
    for name, _ in modes:
        v = statistics.median(results[(name, "vireo")])
        r = statistics.median(results[(name, "redis")])
        print(f"| {name} | {v:,.0f} | {r:,.0f} | {v / r:.2f} | {v / off:.2f} |")


def make_dataset(keys, vireo):
    d = tempfile.mkdtemp(prefix="vireo-dataset-")
    s = ServerProc("redis", vireo, d, [])
    s.wait_ready()
    pipe = subprocess.Popen(["redis-cli", "-p", str(s.port), "--pipe"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    value = b"x" * 16
    batch = 100_000
    for start in range(0, keys, batch):
        pipe.stdin.write(b"".join(
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\n%s\r\n" % (i, value)
            for i in range(start, min(start + batch, keys))))
    pipe.stdin.close()
    pipe.wait()
    assert int(cli(s.port, "DBSIZE")) == keys
    cli(s.port, "SAVE")
    s.stop()
    return os.path.join(d, "dump.rdb")


def load_and_bgsave(kind, vireo, dump, keys):
    d = tempfile.mkdtemp(prefix=f"vireo-bgsave-{kind}-")
    shutil.copy(dump, os.path.join(d, "dump.rdb"))
    s = ServerProc(kind, vireo, d, [])
    load_s = s.wait_ready()
    assert int(cli(s.port, "DBSIZE")) == keys
    load = subprocess.Popen(
        ["redis-benchmark", "-p", str(s.port), "-t", "set", "-n", "100000000", "-c", "50",
         "-P", "16", "-d", "16", "-r", str(keys), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    rss_before = rss_kib(s.proc.pid)
    c0, t0 = int(info(s.port, "stats")["total_commands_processed"]), time.monotonic()
    time.sleep(3)
    c1, t1 = int(info(s.port, "stats")["total_commands_processed"]), time.monotonic()
    normal = (c1 - c0) / (t1 - t0)
    cli(s.port, "BGSAVE")
    start = time.monotonic()
    peak = rss_before
    while True:
        total = rss_kib(s.proc.pid) + sum(private_kib(c) for c in children(s.proc.pid))
        peak = max(peak, total)
        if info(s.port, "persistence").get("rdb_bgsave_in_progress") == "0":
            break
        time.sleep(0.05)
    took = time.monotonic() - start
    c2, t2 = int(info(s.port, "stats")["total_commands_processed"]), time.monotonic()
    during = (c2 - c1) / (t2 - t1)
    status = info(s.port, "persistence")["rdb_last_bgsave_status"]
    load.kill()
    load.wait()
    s.stop()
    shutil.rmtree(d, ignore_errors=True)
    return {
        "load_s": load_s, "bgsave_s": took, "rss_before_mb": rss_before / 1024,
        "peak_extra_pct": 100.0 * (peak - rss_before) / rss_before,
        "normal": normal, "during": during, "status": status,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300_000)
    ap.add_argument("--vireo", default="target/release/vireo")
    ap.add_argument("--skip-aof", action="store_true")
    ap.add_argument("--skip-bgsave", action="store_true")
    ap.add_argument("--base", help="a second Vireo binary, measured alongside in the BGSAVE table")
    args = ap.parse_args()
    if not args.skip_aof:
        aof_table(args.vireo, args.rounds, args.requests)
        print()
    if args.skip_bgsave:
        return
    dump = make_dataset(args.keys, args.vireo)
    # kind -> (server kind, binary); rounds alternate between the servers.
    servers = {"vireo": ("vireo", args.vireo), "redis": ("redis", None)}
    if args.base:
        servers["base"] = ("vireo", args.base)
    rows = {kind: [] for kind in servers}
    for _ in range(args.rounds):
        for kind, (server, binary) in servers.items():
            rows[kind].append(load_and_bgsave(server, binary, dump, args.keys))
    shutil.rmtree(os.path.dirname(dump), ignore_errors=True)
    med = lambda kind, f: statistics.median(r[f] for r in rows[kind])
    kinds = list(servers)
    print(f"{args.keys:,} keys (key:%012d, 16-byte values), medians of {args.rounds} runs:")
    print()
    print("| figure | " + " | ".join(k.capitalize() for k in kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for label, field, fmt in [
        ("start-up load of the dump (s)", "load_s", "{:.2f}"),
        ("RSS before BGSAVE (MB)", "rss_before_mb", "{:,.0f}"),
        ("BGSAVE duration under SET load (s)", "bgsave_s", "{:.2f}"),
        ("peak RSS during BGSAVE over before (%)", "peak_extra_pct", "{:.1f}"),
        ("SET/s before BGSAVE", "normal", "{:,.0f}"),
        ("SET/s during BGSAVE", "during", "{:,.0f}"),
    ]:
        print(f"| {label} | " + " | ".join(fmt.format(med(k, field)) for k in kinds) + " |")
    # The ratio per run, then its median (runs differ in their baseline).
    ratio = lambda kind: statistics.median(r["during"] / r["normal"] for r in rows[kind])
    print("| during / before | " + " | ".join(f"{ratio(k):.2f}" for k in kinds) + " |")
    statuses = {kind: {x['status'] for x in rows[kind]} for kind in rows}
    print()
    print(f"bgsave status: {statuses}")


if __name__ == "__main__":
    main()
