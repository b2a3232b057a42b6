#!/usr/bin/env python3
"""Usage: bench/aof_ab.py OLD_BIN NEW_BIN ROUNDS [REQUESTS]

Alternating A/B of two Vireo builds with bench/persistence.py's own SET
benchmark (-n REQUESTS -c 50 -P 16 -d 64 -r 100000; REQUESTS defaults to
300000, about half a second: use millions for steadier figures): per
round, each build with appendonly off, everysec and always, in turn;
medians."""
import sys, statistics, tempfile, shutil
sys.path.insert(0, __import__("os").path.dirname(__file__))
import persistence as p
builds = {"base": sys.argv[1], "new": sys.argv[2]}
rounds = int(sys.argv[3])
requests = int(sys.argv[4]) if len(sys.argv) > 4 else 300000
modes = [("off", ["--appendonly", "no"]),
         ("everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
         ("always", ["--appendonly", "yes", "--appendfsync", "always"])]
res = {(b, m): [] for b in builds for m, _ in modes}
for r in range(rounds):
    order = list(builds) if r % 2 == 0 else list(builds)[::-1]
    for m, extra in modes:
        for b in order:
            d = tempfile.mkdtemp(prefix="vireo-ab-")
            s = p.ServerProc("vireo", builds[b], d, extra)
            s.wait_ready()
            res[(b, m)].append(p.benchmark_set(s.port, requests, 100000))
            s.stop()
            shutil.rmtree(d, ignore_errors=True)
    print("round", r, {k: v[-1] for k, v in res.items()}, flush=True)
print("| build | off | everysec | always | everysec/off | always/off |")
print("|---|---|---|---|---|---|")
for b in builds:
    med = {m: statistics.median(res[(b, m)]) for m, _ in modes}
    print(f"| {b} | {med['off']:,.0f} | {med['everysec']:,.0f} | {med['always']:,.0f} | {med['everysec']/med['off']:.2f} | {med['always']/med['off']:.2f} |")
for b in builds:
    for m, _ in modes:
        print(b, m, [round(x) for x in res[(b, m)]])
