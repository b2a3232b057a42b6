#!/usr/bin/env python3
"""Turns the raw results of bench/suite.sh into the markdown tables of
BENCHMARKS.md: per test and pipeline depth, the median throughput and p99 of
Vireo, redis-server and the null server over the rounds, the ratios
Vireo/Redis (with the min-max of per-round ratios) and Vireo/null, and how
much CPU each server spent: as a share of one core, and in microseconds per
request.

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
        self.cpu_us = {}  # round -> server CPU microseconds per request
        self.errors = {}  # message -> rounds

    def add_cpu(self, rnd, base, requests):
        """The server's busy share and CPU per request from the NAME.cpu
        file of one run that sent `requests` requests of this row."""
        try:
            server, wall = map(float, read(base + ".cpu").split())
        except ValueError:
            return
        if wall > 0:
            self.server_cpu[rnd] = server / wall
        if requests > 0:
            self.cpu_us[rnd] = server * 1e6 / requests

    def add_error(self, rnd, msg):
        rounds = self.errors.setdefault(mask_digits(msg), [])
        if rnd not in rounds:
            rounds.append(rnd)


def subtract_list_fill(data, fills):
    """redis-benchmark runs N "LPUSH (needed to benchmark LRANGE)" before
    each LRANGE test, in the same invocation and so in the same CPU
    reading. That phase sends the LPUSH test's own command, so its cost is
    taken off at the LPUSH row's rate (same server, round and pipeline);
    without an LPUSH row the LRANGE row gets no CPU per request."""
    for (name, p, server, rnd) in fills:
        cell = data[(name, p)][server]
        lpush = data.get(("LPUSH", p), {}).get(server)
        if lpush is None or rnd not in lpush.cpu_us or rnd not in cell.cpu_us:
            cell.cpu_us.pop(rnd, None)
            continue
        cell.cpu_us[rnd] = max(0.0, cell.cpu_us[rnd] - lpush.cpu_us[rnd])


def collect(raw, requests):
    """Reads every run under RAW (rounds/servers/files); `requests` is the
    number each client invocation sent per test (the suite's N)."""
    data = {}  # (name, pipeline) -> server -> Cell
    order = []
    fills = []  # LRANGE rows whose CPU reading includes the list's fill

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
                    rows = [
                        row
                        for row in csv.reader(text.splitlines())
                        if len(row) >= 7 and row[0] != "test"
                        and not row[0].startswith("LPUSH (needed")
                    ]
                    filled = "LPUSH (needed" in text
                    for row in rows:
                        name = row_name(row[0])
                        c = cell(name, p, server)
                        c.rps[rnd] = float(row[1])
                        c.p99[rnd] = float(row[6])
                        # `-t ping` measures two rows in one CPU reading.
                        c.add_cpu(rnd, base, requests * len(rows))
                        if filled:
                            fills.append((name, p, server, rnd))
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
                        c.add_cpu(rnd, base, res["replies"])
                    for e in res.get("errors", [])[:3]:
                        c.add_error(rnd, f'{e["message"]} (x{e["count"]})')
    subtract_list_fill(data, fills)
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


def fmt_us(v):
    return "–" if v is None else f"{v:.2f}"


def table(data, order, p):
    head = [
        "test",
        "Vireo ops/s",
        "Redis ops/s",
        "Vireo/Redis",
        "Vireo p99 ms",
        "Redis p99 ms",
        "null ops/s",
        "Vireo/null",
        "Vireo CPU",
        "Redis CPU",
        "Vireo µs/req",
        "Redis µs/req",
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, pp in order:
        if pp != p or name.endswith("(scaling)"):
            continue
        cells = data[(name, p)]
        v, r, n = (cells.get(s, Cell()) for s in ("vireo", "redis", "null"))
        vireo_txt = fmt_ops(med(v.rps))
        if v.errors and med(v.rps) is None:
            vireo_txt = "error"
        row = [
            name,
            vireo_txt,
            fmt_ops(med(r.rps)),
            ratio_cell(v.rps, r.rps)[1],
            fmt_ms(med(v.p99)),
            fmt_ms(med(r.p99)),
            fmt_ops(med(n.rps)),
            ratio_cell(v.rps, n.rps)[1],
            fmt_pct(med(v.server_cpu)),
            fmt_pct(med(r.server_cpu)),
            fmt_us(med(v.cpu_us)),
            fmt_us(med(r.cpu_us)),
        ]
        rows.append("| " + " | ".join(row) + " |")
    return rows


def load_text(meta):
    """'; load average A at the start, up to M, B at the end', and a warning
    when other work shared the machine, from META's LOAD_START, LOAD_MAX
    (highest sampled, if sampled), LOAD_END and CORES."""
    try:
        loads = [float(meta[k]) for k in ("LOAD_START", "LOAD_MAX", "LOAD_END") if meta.get(k)]
        cores = int(meta.get("CORES", "0"))
    except ValueError:
        return "", ""
    if not loads:
        return "", ""
    text = f"; load average {meta['LOAD_START']} at the start"
    if meta.get("LOAD_MAX"):
        text += f", up to {meta['LOAD_MAX']}"
    text += f", {meta.get('LOAD_END', '?')} at the end"
    busy = ""
    if cores and max(loads) >= cores:
        busy = (
            " **The machine was shared with other work during this run** (the run"
            " itself adds about 1 to 1.5 to the load average): absolute figures are"
            " lower, and ratios noisier, than on an idle machine."
        )
    return text, busy


def client_bound_note(data, order, p):
    """A sentence when, at pipeline P, both servers ran at about the null
    server's rate over most rows: the client was the limit, not the servers."""
    shares = {"vireo": [], "redis": []}
    for name, pp in order:
        if pp != p or name.endswith("(scaling)"):
            continue
        cells = data[(name, p)]
        n = med(cells.get("null", Cell()).rps)
        for s in shares:
            v = med(cells.get(s, Cell()).rps)
            if v is not None and n:
                shares[s].append(v / n)
    if not all(shares.values()):
        return []
    mv, mr = (statistics.median(shares[s]) for s in ("vireo", "redis"))
    if not all(0.8 <= m <= 1.25 for m in (mv, mr)):
        return []
    return [
        "",
        f"At `-P {p}` both servers ran at about the null server's rate (medians over"
        f" the rows: Vireo/null {mv:.2f}, Redis/null {mr:.2f}): there the client on"
        " its one core is the limit, so ops/s say little about the servers and"
        " µs/req compares them better.",
    ]


def header(meta, rounds):
    """Where, when and how the tables were measured."""
    dirty = " (with uncommitted changes)" if meta.get("DIRTY") == "yes" else ""
    load, busy = load_text(meta)
    return [
        f"Measured {meta.get('DATE', '?')} at commit {meta.get('COMMIT', '?')}{dirty}"
        f" on {meta.get('CORES', '?')} cores ({meta.get('CPU', '?')}){load};"
        f" redis-server {meta.get('REDIS', '?')}; {meta.get('PINNING', '')}."
        f" Reproduce: `{meta.get('COMMAND', 'bench/suite.sh')}`.{busy}",
        "",
        f"{meta.get('N', '?')} requests per test, {len(rounds)} rounds "
        f"(server order alternates each round), {meta.get('CLIENTS', '?')} clients, "
        f"{meta.get('DATA', '?')}-byte values, {meta.get('KEYSPACE', '?')} keys; "
        f"Vireo runs with `--save \"\" --appendonly no {meta.get('VIREO_ARGS', '')}`,"
        " Redis with `--save \"\" --appendonly no`.",
    ]


def figures(data, order):
    """The medians per row and pipeline, for bench/report_md.py's summary."""
    out = {}
    for name, p in order:
        cells = data[(name, p)]
        v, r, n = (cells.get(s, Cell()) for s in ("vireo", "redis", "null"))
        out.setdefault(name, {})[str(p)] = {
            "vireo_ops": med(v.rps),
            "redis_ops": med(r.rps),
            "null_ops": med(n.rps),
            "vireo_cpu_share": med(v.server_cpu),
            "redis_cpu_share": med(r.server_cpu),
            "vireo_us": med(v.cpu_us),
            "redis_us": med(r.cpu_us),
        }
    return out


def read_meta(out_dir):
    meta = {}
    for line in read(os.path.join(out_dir, "meta.env")).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k] = v
    return meta


def render(out_dir):
    """The Markdown block between the markers, and the figures behind it."""
    meta = read_meta(out_dir)
    data, order, rounds = collect(
        os.path.join(out_dir, "raw"), int(meta.get("N", "0") or 0)
    )
    pipelines = sorted({p for _, p in order})
    o = [BEGIN, ""] + header(meta, rounds)
    if meta.get("VIREO_NOTE"):
        o += ["", f"**Note:** {meta['VIREO_NOTE']}"]
    for p in pipelines:
        o += ["", f"### Pipeline {p} (`-P {p}`)", ""]
        o += table(data, order, p)
        o += client_bound_note(data, order, p)
    scaling = [k for k in order if k[0].endswith("(scaling)")]
    if scaling:
        o += ["", "### Vireo with 2 worker threads vs 1 (unpinned)", ""]
        for key in scaling:
            cells = data[key]
            t1, t2 = cells.get("vireo-t1", Cell()), cells.get("vireo-t2", Cell())
            o.append(
                f"{key[0]} at `-P {key[1]}`, 2 client threads: "
                f"1 thread {fmt_ops(med(t1.rps))} ops/s, 2 threads {fmt_ops(med(t2.rps))} ops/s, "
                f"ratio {ratio_cell(t2.rps, t1.rps)[1]}. Client and server share the "
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
    o += ["", "### Errors", ""]
    if errs:
        o += ["| server | test | P | rounds | message |", "|---|---|---|---|---|"] + errs
    else:
        o.append("None.")
    o += ["", END]
    return "\n".join(o) + "\n", {"meta": meta, "rows": figures(data, order)}


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
        text = text.rstrip("\n") + "\n\n## Throughput per command\n\n" + block
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, md = sys.argv[1], sys.argv[2]
    block, figs = render(out_dir)
    with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(block)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(figs, f, indent=1)
    splice(md, block)
    print(block)


if __name__ == "__main__":
    main()
