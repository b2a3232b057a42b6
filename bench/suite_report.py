#!/usr/bin/env python3
"""Turns the raw results of bench/suite.sh into the markdown table of
BENCHMARKS.md: per test and pipeline depth, the median throughput and p99 of
Vireo, redis-server and the null server over the rounds, and the ratios
Vireo/Redis (with the min-max of per-round ratios) and Vireo/null.

Usage: suite_report.py RESULTS_DIR BENCHMARKS.md
"""

import csv
import json
import os
import re
import statistics
import sys

BEGIN = "<!-- vireo-bench-suite:begin -->"
END = "<!-- vireo-bench-suite:end -->"
# Targets of issue 4: Vireo/Redis throughput by pipeline depth.
TARGET = {1: 1.2, 16: 1.5}
NULL_TARGET = 0.85  # GET and SET at -P 16, Vireo/null
SCALING_TARGET = 1.6
WORKLOADS = {
    "zipf": "vireo bench SET:GET 1:10 zipf:0.99",
    "uniform": "vireo bench SET:GET 1:1 uniform",
}
IGNORED_STDERR = ("WARNING: Could not fetch server CONFIG",)
# Row order of the tables: redis-benchmark's own order, then vireo bench.
ROW_ORDER = [
    "PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP",
    "RPOP", "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN", "LRANGE_100", "LRANGE_300",
    "LRANGE_500", "LRANGE_600", "MSET",
] + list(WORKLOADS.values())


def row_key(key):
    name, p = key
    base = name.replace(" (scaling)", "")
    pos = ROW_ORDER.index(base) if base in ROW_ORDER else len(ROW_ORDER)
    return (p, pos, name)


def mask_digits(msg):
    """Groups messages that differ only in numbers (keys, values)."""
    return re.sub(r"\d+", "N", msg)


def expected_rows(test):
    t = test.strip().lower()
    if t == "ping":
        return ["PING_INLINE", "PING_MBULK"]
    return [t.upper()]


def row_name(raw):
    """'LRANGE_100 (first 100 elements)' -> 'LRANGE_100'."""
    return re.sub(r"\s*\(.*\)$", "", raw.strip())


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def failure(base):
    """Why a client invocation failed, or None."""
    rc = read(base + ".rc").strip()
    if rc in ("", "0"):
        return None
    if rc in ("124", "137"):
        return "timed out (no reply; the client was stopped)"
    lines = [
        line.strip()
        for line in read(base + ".err").splitlines()
        if line.strip() and not line.startswith(IGNORED_STDERR)
    ]
    msg = lines[-1] if lines else f"exit status {rc}"
    return msg[:160]


class Cell:
    """Per-round values of one (test, pipeline, server)."""

    def __init__(self):
        self.rps = {}  # round -> ops/s
        self.p99 = {}  # round -> ms
        self.server_cpu = {}  # round -> share of one core the server used
        self.errors = {}  # message -> rounds

    def add_cpu(self, rnd, base):
        """The server's busy share from the NAME.cpu file of one run."""
        try:
            server, wall = map(float, read(base + ".cpu").split())
        except ValueError:
            return
        if wall > 0:
            self.server_cpu[rnd] = server / wall

    def add_error(self, rnd, msg):
        rounds = self.errors.setdefault(mask_digits(msg), [])
        if rnd not in rounds:
            rounds.append(rnd)


def collect(raw):
    data = {}  # (name, pipeline) -> server -> Cell
    order = []

    def cell(name, p, server):
        key = (name, p)
        if key not in data:
            data[key] = {}
            order.append(key)
        return data[key].setdefault(server, Cell())

    rounds = sorted((d for d in os.listdir(raw) if d.isdigit()), key=int)
    for rnd in rounds:
        rdir = os.path.join(raw, rnd)
        for server in sorted(os.listdir(rdir)):
            sdir = os.path.join(rdir, server)
            files = sorted(f for f in os.listdir(sdir) if f.endswith(".rc"))
            for f in files:
                base = os.path.join(sdir, f[:-3])
                m = re.match(r"rb-P(\d+)-(.+)\.rc$", f)
                if m:
                    p, test = int(m.group(1)), m.group(2)
                    seen = set()
                    text = read(base + ".out")
                    for row in csv.reader(text.splitlines()):
                        if len(row) < 7 or row[0] == "test":
                            continue
                        name = row_name(row[0])
                        if row[0].startswith("LPUSH (needed"):
                            continue
                        c = cell(name, p, server)
                        c.rps[rnd] = float(row[1])
                        c.p99[rnd] = float(row[6])
                        c.add_cpu(rnd, base)
                        seen.add(name)
                    err = failure(base)
                    for name in expected_rows(test):
                        if name not in seen:
                            cell(name, p, server).add_error(
                                rnd, err or "no result printed"
                            )
                    continue
                m = re.match(r"vb-P(\d+)-(\w+?)(-scaling)?\.rc$", f)
                if m:
                    p, wl, scaling = int(m.group(1)), m.group(2), m.group(3)
                    name = WORKLOADS.get(wl, wl) + (" (scaling)" if scaling else "")
                    c = cell(name, p, server)
                    try:
                        with open(base + ".json", encoding="utf-8") as fh:
                            res = json.load(fh)["result"]
                    except (OSError, ValueError, KeyError):
                        c.add_error(rnd, failure(base) or "no JSON result")
                        continue
                    if res["replies"] > 0:
                        c.rps[rnd] = res["ops_per_sec"]
                        c.p99[rnd] = res["latency_ms"]["p99"]
                        c.add_cpu(rnd, base)
                    for e in res.get("errors", [])[:3]:
                        c.add_error(rnd, f'{e["message"]} (x{e["count"]})')
    order.sort(key=row_key)
    return data, order, rounds


def med(d):
    return statistics.median(d.values()) if d else None


def fmt_ops(v):
    return "–" if v is None else f"{v:,.0f}"


def fmt_pct(v):
    return "–" if v is None else f"{100 * v:.0f}%"


def fmt_ms(v):
    return "–" if v is None else f"{v:.3f}"


def ratio_cell(a, b):
    """median(a)/median(b) with the min-max of per-round ratios."""
    ma, mb = med(a), med(b)
    if ma is None or mb is None or mb == 0:
        return None, "–"
    r = ma / mb
    per = [a[k] / b[k] for k in a if k in b and b[k] > 0]
    spread = f" ({min(per):.2f}–{max(per):.2f})" if len(per) > 1 else ""
    return r, f"{r:.2f}{spread}"


def mark(ok):
    return "✓" if ok else "✗"


def table(data, order, p, have_vireo):
    rows = []
    head = [
        "test",
        "Vireo ops/s",
        "Redis ops/s",
        "Vireo/Redis",
        f"≥{TARGET[p]}×" if p in TARGET else "target",
        "Vireo p99 ms",
        "Redis p99 ms",
        "p99 ≤ Redis",
        "null ops/s",
        "Vireo/null",
        "Redis/null",
        "Vireo CPU",
        "Redis CPU",
    ]
    rows.append("| " + " | ".join(head) + " |")
    rows.append("|" + "---|" * len(head))
    for name, pp in order:
        if pp != p or name.endswith("(scaling)"):
            continue
        cells = data[(name, p)]
        v, r, n = (cells.get(s, Cell()) for s in ("vireo", "redis", "null"))
        ratio, ratio_txt = ratio_cell(v.rps, r.rps)
        target = "–"
        if ratio is not None and p in TARGET:
            target = mark(ratio >= TARGET[p])
        elif have_vireo and p in TARGET and v.errors:
            target = "✗"
        p99_ok = "–"
        if med(v.p99) is not None and med(r.p99) is not None:
            p99_ok = mark(med(v.p99) <= med(r.p99))
        vn, vn_txt = ratio_cell(v.rps, n.rps)
        if vn is not None and p == 16 and name in ("GET", "SET"):
            vn_txt += f" {mark(vn >= NULL_TARGET)}"
        _, rn_txt = ratio_cell(r.rps, n.rps)
        vireo_txt = fmt_ops(med(v.rps))
        if v.errors and med(v.rps) is None:
            vireo_txt = "error"
        rows.append(
            "| "
            + " | ".join(
                [
                    name,
                    vireo_txt,
                    fmt_ops(med(r.rps)),
                    ratio_txt,
                    target,
                    fmt_ms(med(v.p99)),
                    fmt_ms(med(r.p99)),
                    p99_ok,
                    fmt_ops(med(n.rps)),
                    vn_txt,
                    rn_txt,
                    fmt_pct(med(v.server_cpu)),
                    fmt_pct(med(r.server_cpu)),
                ]
            )
            + " |"
        )
    return rows


def render(out_dir):
    meta = {}
    for line in read(os.path.join(out_dir, "meta.env")).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k] = v
    data, order, rounds = collect(os.path.join(out_dir, "raw"))
    have_vireo = any("vireo" in cells for cells in data.values())
    pipelines = sorted({p for _, p in order})
    o = [BEGIN, ""]
    o.append(
        f"Latest run: {meta.get('DATE', '?')}, commit {meta.get('COMMIT', '?')}"
        + (" (with uncommitted changes)" if meta.get("DIRTY") == "yes" else "")
        + f"; {meta.get('CORES', '?')} cores ({meta.get('CPU', '?')}); "
        f"redis-server {meta.get('REDIS', '?')}; {meta.get('PINNING', '')}."
    )
    o.append("")
    o.append(
        f"Settings: {meta.get('N', '?')} requests per test, {len(rounds)} rounds "
        f"(server order alternates each round), {meta.get('CLIENTS', '?')} clients, "
        f"{meta.get('DATA', '?')}-byte values, {meta.get('KEYSPACE', '?')} keys; "
        f"Vireo started with `--save \"\" --appendonly no {meta.get('VIREO_ARGS', '')}`."
        " Figures are medians over the rounds; a ratio's parentheses hold the "
        "min–max of its per-round ratios. ✓/✗ mark the targets of issue 4."
        " The CPU columns are the share of one core the server (all its threads)"
        " was busy during the run, client start-up included: a server well under"
        " 100% was waiting for the client, so the row measures the client."
    )
    if meta.get("VIREO_NOTE"):
        o += ["", f"**Note:** {meta['VIREO_NOTE']}"]
    for p in pipelines:
        o += ["", f"#### Pipeline {p} (`-P {p}`)", ""]
        o += table(data, order, p, have_vireo)
    scaling = [k for k in order if k[0].endswith("(scaling)")]
    if scaling:
        o += ["", "#### Scaling: Vireo with 2 worker threads vs 1 (unpinned)", ""]
        for key in scaling:
            cells = data[key]
            t1, t2 = cells.get("vireo-t1", Cell()), cells.get("vireo-t2", Cell())
            r, txt = ratio_cell(t2.rps, t1.rps)
            verdict = "–" if r is None else mark(r >= SCALING_TARGET)
            o.append(
                f"{key[0]} at `-P {key[1]}`, 2 client threads: "
                f"1 thread {fmt_ops(med(t1.rps))} ops/s, 2 threads {fmt_ops(med(t2.rps))} ops/s, "
                f"ratio {txt} (target ≥{SCALING_TARGET}× {verdict}). Client and server share the "
                "machine's cores here, so on 2 cores this shows contention more than scaling."
            )
    errs = []
    for (name, p), cells in ((k, data[k]) for k in order):
        for server, c in sorted(cells.items()):
            for msg, rnds in c.errors.items():
                errs.append(
                    f"| {server} | {name} | {p} | {len(rnds)}/{len(rounds)} | "
                    f"{msg.replace('|', '/')} |"
                )
    o += ["", "#### Errors", ""]
    if errs:
        o += ["| server | test | P | rounds | message |", "|---|---|---|---|---|"] + errs
    else:
        o.append("None.")
    o += ["", END]
    return "\n".join(o) + "\n"


def splice(md_path, block):
    try:
        with open(md_path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        text = "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block.rstrip("\n") + tail
    else:
        if "## vireo bench and the suite" not in text:
            text = text.rstrip("\n") + "\n\n## vireo bench and the suite\n"
        text = text.rstrip("\n") + "\n\n### Latest suite results\n\n" + block
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, md = sys.argv[1], sys.argv[2]
    block = render(out_dir)
    with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(block)
    splice(md, block)
    print(block)


if __name__ == "__main__":
    main()
