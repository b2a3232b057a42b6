"""Resident memory per idle connection, Vireo against redis-server (or any
two servers): open N connections, each sends one PING (so the server sets
up its buffers) and reads the reply, wait until the servers have had time
to trim idle clients (Redis frees an idle client's query buffer after two
seconds), then read each server's VmRSS. The servers must run on this
machine with a maxclients above N; the client needs N file descriptors.

Usage: bench/idle_connections.py PORT PID [PORT PID ...] [--n N] [--wait S]
  e.g. target/release/vireo --port 7001 --save "" --maxclients 20000 &
       redis-server --port 7002 --save "" --maxclients 20000 --daemonize yes
       bench/idle_connections.py 7001 $(pgrep -f 'vireo --port 7001') \\
                                 7002 $(pgrep -f 'redis-server.*7002')
"""
import argparse
import socket
import time


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def measure(port, pid, n, wait):
    base = rss(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PING\r\n")
        socks.append(s)
    for s in socks:
        s.recv(16)
    time.sleep(wait)
    after = rss(pid)
    for s in socks:
        s.close()
    return base, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="+", help="PORT PID pairs")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--wait", type=float, default=4.0)
    a = ap.parse_args()
    pairs = list(zip(a.targets[::2], a.targets[1::2]))
    for port, pid in pairs:
        base, after = measure(int(port), int(pid), a.n, a.wait)
        print(f"port {port}: {a.n} idle connections, RSS {base / 1e6:.1f} MB -> "
              f"{after / 1e6:.1f} MB, {(after - base) / a.n:.0f} bytes per connection")


if __name__ == "__main__":
    main()
