#!/usr/bin/env python3
"""A/B of PUBLISH fan-out: Vireo vs redis-server, alternating rounds.

For each round and server: SUBSCRIBERS connections SUBSCRIBE to one
channel, then redis-benchmark (50 clients, -P 16) PUBLISHes N messages of
64 bytes to it. Reported per server (medians over ROUNDS): messages
published per second (redis-benchmark's figure) and messages delivered
per second (messages the subscribers received, over the time from the
first PUBLISH to the last delivery). Every message is accounted for: a
round where a subscriber misses one fails.

  MODE=pinned (default): Vireo --threads 1 and Redis on core 0, publishers
    and subscribers on core 1.
  MODE=all: Vireo with its default workers, nothing pinned.
Settings (environment): VIREO (target/release/vireo), ROUNDS (3),
N (200000), SUBSCRIBERS (1,100: a list runs each count), V/R ports.
"""
import os, selectors, socket, statistics, subprocess, sys, time

VIREO = os.environ.get("VIREO", "target/release/vireo")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
N = int(os.environ.get("N", "200000"))
COUNTS = [int(x) for x in os.environ.get("SUBSCRIBERS", "1,100").split(",")]
MODE = os.environ.get("MODE", "pinned")
PORTS = {"vireo": int(os.environ.get("V", "17521")), "redis": int(os.environ.get("R", "17522"))}
CHANNEL = b"bench-channel"
DATA = b"x" * 64
# What a subscriber receives per message (RESP2 push).
FRAME = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL, len(DATA), DATA)


def pin(core):
    return ["taskset", "-c", str(core)] if MODE == "pinned" else []


def start_servers():
    threads = ["--threads", "1"] if MODE == "pinned" else []
    procs = [
        subprocess.Popen(pin(0) + [VIREO, "--port", str(PORTS["vireo"]), "--save", ""] + threads,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(pin(0) + ["redis-server", "--port", str(PORTS["redis"]), "--save", "",
                                   "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    time.sleep(1)
    return procs


def subscribe(port, count):
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL))
        socks.append(s)
    confirm = b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL)
    for s in socks:
        got = b""
        while len(got) < len(confirm):
            got += s.recv(len(confirm) - len(got))
        assert got == confirm, got
        s.setblocking(False)
    return socks


def round_once(port, count):
    socks = subscribe(port, count)
    sel = selectors.DefaultSelector()
    received = {s: 0 for s in socks}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    bench = subprocess.Popen(
        pin(1) + ["redis-benchmark", "-p", str(port), "-c", "50", "-P", "16", "-n", str(N), "-q",
                  "publish", CHANNEL.decode(), DATA.decode()],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    start = time.monotonic()
    last = start
    want = len(FRAME) * N
    while True:
        events = sel.select(timeout=2.0)
        if not events:
            break
        for key, _ in events:
            chunk = key.fileobj.recv(1 << 20)
            if chunk:
                received[key.fileobj] += len(chunk)
                last = time.monotonic()
        if all(v >= want for v in received.values()) and bench.poll() is not None:
            break
    out = bench.communicate()[0].decode().replace("\r", "\n")
    published = float(out.split("requests per second")[0].split()[-1])
    for s in socks:
        s.close()
    delivered = sum(received.values())
    if delivered != want * count:
        sys.exit(f"port {port}: {count} subscribers got {delivered // len(FRAME)} of {N * count} messages")
    return published, delivered / len(FRAME) / (last - start)


def main():
    procs = start_servers()
    try:
        results = {}
        for count in COUNTS:
            for r in range(ROUNDS):
                order = ["vireo", "redis"] if r % 2 == 0 else ["redis", "vireo"]
                for name in order:
                    pub, dlv = round_once(PORTS[name], count)
                    results.setdefault((count, name), []).append((pub, dlv))
                    print(f"{r + 1} {name} subscribers={count}: published {pub:,.0f}/s delivered {dlv:,.0f}/s", flush=True)
        print(f"\n| subscribers | figure | Vireo | Redis | Vireo/Redis |\n|---|---|---|---|---|")
        for count in COUNTS:
            for i, figure in enumerate(["published/s", "delivered/s"]):
                v = statistics.median(x[i] for x in results[(count, "vireo")])
                r = statistics.median(x[i] for x in results[(count, "redis")])
                print(f"| {count} | {figure} | {v:,.0f} | {r:,.0f} | {v / r:.2f} |")
    finally:
        for p in procs:
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
