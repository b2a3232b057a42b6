#!/usr/bin/env python3
"""The Markdown side of bench/report.sh: turns one section's raw output into
the block BENCHMARKS.md holds between that section's markers, keeps the
section's key figures in figures.json (beside the charts), and builds the
summary table at the top of the report from those figures, so a run of one
section leaves the others and the summary consistent.

Usage:
  report_md.py section NAME RAW_DIR MD FIGURES   # NAME: memory, persistence,
                                                 # maxmemory, charts or features
  report_md.py suite SUMMARY_JSON FIGURES        # bench/suite_report.py's figures
  report_md.py summary MD FIGURES

The section's header comes from the environment bench/report.sh sets:
REPORT_DATE, REPORT_COMMIT, REPORT_DIRTY (yes/no), REPORT_CORES, REPORT_CPU,
REPORT_REDIS, REPORT_LOAD_START, REPORT_LOAD_END, REPORT_COMMAND.
"""

import ast
import json
import os
import re
import statistics
import sys

from suite_report import load_text


def begin(name):
    return f"<!-- vireo-report:{name}:begin -->"


def end(name):
    return f"<!-- vireo-report:{name}:end -->"


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def splice(md_path, name, body):
    """Replaces what lies between NAME's markers in MD with BODY, or appends
    the markers and BODY at the end when MD has none yet."""
    text = read(md_path) or "# Benchmarks\n"
    block = begin(name) + "\n\n" + body.strip("\n") + "\n\n" + end(name)
    if begin(name) in text and end(name) in text:
        head, rest = text.split(begin(name), 1)
        _, tail = rest.split(end(name), 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)


def load_figures(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_figures(path, figs):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(figs, f, indent=1, sort_keys=True)
        f.write("\n")


def meta_from_env():
    keys = ["DATE", "COMMIT", "DIRTY", "CORES", "CPU", "REDIS", "LOAD_START",
            "LOAD_MAX", "LOAD_END", "COMMAND"]
    return {k: os.environ.get("REPORT_" + k, "") for k in keys}


def header(meta, timed=True):
    """One line: when, which build, which machine, how loaded, how to redo it;
    for TIMED figures (not bytes), a warning when the machine was busy."""
    dirty = " (with uncommitted changes)" if meta.get("DIRTY") == "yes" else ""
    load, busy = load_text(meta)
    if not timed:
        busy = ""
    return (
        f"Measured {meta['DATE']} at commit {meta['COMMIT']}{dirty} on "
        f"{meta['CORES']} cores ({meta['CPU']}){load}; redis-server {meta['REDIS']}. "
        f"Reproduce: `{meta['COMMAND']}`.{busy}"
    )


def table_rows(text):
    """The body rows of every Markdown table in TEXT, as lists of cells."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|") or re.match(r"^\|(\s*-+\s*\|)+$", line):
            continue
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def number(cell):
    """'1,234.5' -> 1234.5; None for anything else."""
    try:
        return float(cell.replace(",", "").rstrip("%"))
    except ValueError:
        return None


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(ratios):
    ratios = [r for r in ratios if r is not None]
    return f" ({min(ratios):.2f}–{max(ratios):.2f})" if len(ratios) > 1 else ""


# --- sections ----------------------------------------------------------------


def memory(raw):
    keys = read(os.path.join(raw, "memory-keys.md")).strip()
    elems = read(os.path.join(raw, "memory-elements.md")).strip()
    if not keys and not elems:
        return None, None
    body = [
        "Bytes per key: the growth of INFO's `used_memory` (what the server's",
        "allocator handed out) over the keys loaded, and of `used_memory_rss`",
        "(what the process holds from the OS), loaded with `redis-cli --pipe`.",
        "",
        keys or "(not measured)",
        "",
        "Bytes per element: one list, hash (field and value `v`), set and",
        "sorted set of elements `element:0000000`…, `used_memory` growth over",
        "the elements.",
        "",
        elems or "(not measured)",
    ]
    # Lists: the summary picks loads by their place in the table.
    figs = {
        "keys": [{"load": r[0], "vireo": number(r[1]), "redis": number(r[2])}
                 for r in table_rows(keys)[1:]],
        "elements": {r[0]: {"vireo": number(r[1]), "redis": number(r[2])}
                     for r in table_rows(elems)[1:]},
    }
    return "\n".join(body), figs


def persistence(raw):
    text = read(os.path.join(raw, "persistence.md")).strip()
    if not text:
        return None, None
    lines, status = [], None
    for line in text.splitlines():
        if line.startswith("bgsave status:"):
            status = ast.literal_eval(line.split(":", 1)[1].strip())
        else:
            lines.append(line)
    tables = "\n".join(lines)
    parts = tables.split("\n\n")
    has_aof = "appendfsync" in parts[0]
    aof = parts[0] if has_aof else ""
    rest = "\n\n".join(parts[1:] if has_aof else parts).strip()
    body = [
        "AOF: `redis-benchmark -t set -P 16 -c 50 -d 64 -r 100000` against a",
        "fresh server per run with `appendonly no`, then `appendonly yes` with",
        "`appendfsync everysec` and `always` (Vireo: one worker per core; all",
        "unpinned). SET/s, medians over the rounds:",
        "",
        aof or "(not measured)",
    ]
    if rest:
        body += [
            "",
            "BGSAVE under load: both servers start from the same dump, a",
            "`redis-benchmark` SET load (`-P 16`, 16-byte values) overwrites",
            "its keys, and BGSAVE runs in the middle. Redis forks (its peak",
            "counts the child's copied pages); Vireo takes a point-in-time cut",
            "and serializes it on a background thread at idle priority.",
            "",
            rest,
        ]
    if status:
        said = ", ".join(f"{k.capitalize()} {'/'.join(sorted(v))}" for k, v in status.items())
        body += ["", f"BGSAVE status of every run: {said}."]
    figs = {
        "aof": {r[0]: {"vireo": number(r[1]), "redis": number(r[2])}
                for r in table_rows(aof)[1:]},
        "bgsave": {r[0]: {"vireo": number(r[1]), "redis": number(r[2])}
                   for r in table_rows(rest)[1:]},
    }
    m = re.search(r"([\d,]+) keys", rest)
    if m:
        figs["bgsave_keys"] = int(m.group(1).replace(",", ""))
    return "\n".join(body), figs


# bench/maxmemory_ab.sh's ports: server -> (unlimited, limited).
MAXMEMORY_PORTS = {"vireo": ("17511", "17512"), "redis": ("17513", "17514")}


def maxmemory(raw):
    text = read(os.path.join(raw, "maxmemory.txt"))
    rates = {}  # (round, port) -> ops/s
    peaks, evicted = {}, {}
    for line in text.splitlines():
        m = re.match(r"^(\d+) (\d+) .*= ([\d,]+) ops/s", line)
        if m:
            rates[(m.group(1), m.group(2))] = float(m.group(3).replace(",", ""))
            continue
        m = re.match(r"^(\d+) max (\d*) limit (\d+) evicted evicted_keys:(\d+)", line)
        if m:
            peaks[m.group(1)] = (int(m.group(2) or 0), int(m.group(3)))
            evicted[m.group(1)] = int(m.group(4))
    if not rates:
        return None, None
    rounds = sorted({r for r, _ in rates}, key=int)
    rows = [
        "| server | unlimited SET/s | maxmemory 100mb SET/s | limited / unlimited |"
        " highest used_memory / limit | keys evicted |",
        "|---|---|---|---|---|---|",
    ]
    figs = {"rounds": len(rounds)}
    for server, (unl, lim) in MAXMEMORY_PORTS.items():
        u = [rates.get((r, unl)) for r in rounds]
        lm = [rates.get((r, lim)) for r in rounds]
        per = [b / a if a and b else None for a, b in zip(u, lm)]
        mu, ml = med(u), med(lm)
        ratio = ml / mu if mu and ml else None
        peak, limit = peaks.get(lim, (0, 0))
        over = peak / limit if limit else None
        rows.append(
            f"| {'Vireo' if server == 'vireo' else 'Redis'} | "
            f"{'–' if mu is None else f'{mu:,.0f}'} | {'–' if ml is None else f'{ml:,.0f}'} | "
            f"{'–' if ratio is None else f'{ratio:.2f}'}{spread(per)} | "
            f"{'–' if over is None else f'{over:.3f}'} | "
            f"{'–' if lim not in evicted else f'{evicted[lim]:,}'} |"
        )
        figs[server] = {"unlimited": mu, "limited": ml, "ratio": ratio,
                        "peak_over_limit": over}
    if figs["vireo"]["limited"] and figs["redis"]["limited"]:
        figs["limited_vireo_over_redis"] = figs["vireo"]["limited"] / figs["redis"]["limited"]
    body = [
        "`vireo bench` SETs of 100-byte values over 10M uniformly drawn keys",
        "(2 client threads x 25 connections, `-P 16`, 5 s per run) against",
        "four servers side by side, unpinned, Vireo with one worker per core:",
        "each server without a limit and with `maxmemory 100mb`",
        "`maxmemory-policy allkeys-lru`. The limited servers are filled past",
        "the limit first, so every measured SET may evict; the unlimited ones",
        "are not flushed between rounds, so their key count grows. Medians",
        f"over {len(rounds)} rounds (parentheses: min–max of per-round ratios);",
        "used_memory sampled every 0.2 s.",
        "",
    ] + rows
    if figs.get("limited_vireo_over_redis"):
        body += ["", f"At the limit Vireo serves {figs['limited_vireo_over_redis']:.2f}x"
                 " Redis's SETs per second."]
    return "\n".join(body), figs


# (JSON and SVG name, alt text, what the chart shows)
CHARTS = [
    ("p16", "SET:GET 1:10 at -P 16, Vireo and redis-server",
     "SET:GET 1:10, zipf(0.99) over 100K keys, 64-byte values, `-P 16`, 50 connections,"
     " as fast as each server goes (closed loop)"),
    ("rate", "SET:GET 1:10 at -P 1 and a fixed rate, Vireo and redis-server",
     "the same mix at `-P 1` and a fixed offered rate (open loop): latency measured"
     " from each request's intended send time, so stalls are not hidden"),
]


def chart_rows(doc):
    """Vireo (A) against Redis (B) from a `vireo bench --compare` JSON."""
    figs = {f["name"]: f for f in doc.get("figures", [])}
    rows = ["| figure | Vireo | Redis | Vireo/Redis |", "|---|---|---|---|"]
    out = {}
    for name in ["ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms"]:
        f = figs.get(name)
        if not f:
            continue
        a, b = f["a_median"], f["b_median"]
        ratio = a / b if b else None
        per = [1 / r for r in f.get("round_ratios", []) if r]
        fmt = (lambda v: f"{v:,.0f}") if name == "ops/s" else (lambda v: f"{v:.3f}")
        rows.append(f"| {name} | {fmt(a)} | {fmt(b)} | "
                    f"{'–' if ratio is None else f'{ratio:.2f}'}{spread(per)} |")
        out[name] = {"vireo": a, "redis": b}
    return rows, out


def charts(raw):
    body, figs = [], {}
    for key, alt, what in CHARTS:
        try:
            with open(os.path.join(raw, f"chart-{key}.json"), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        cfg = doc.get("config", {})
        rate = f", offered {cfg['rate']:,.0f} ops/s" if cfg.get("rate") else ""
        rows, out = chart_rows(doc)
        rounds = doc.get("compare", {}).get("rounds", "?")
        if cfg.get("rate"):
            done = [v for v in out.get("ops/s", {}).values() if v is not None]
            if done and min(done) < 0.97 * cfg["rate"]:
                rows += ["", f"**The offered {cfg['rate']:,.0f} ops/s was not met** (the"
                         " machine was too busy): these latencies include the backlog."]
        body += [
            f"**{what}**{rate}; `vireo bench --compare`, {rounds} alternating rounds"
            f" of {cfg.get('test_time_s') or 0:g} s, servers on core 0 (Vireo `--threads 1`),"
            " client on core 1.",
            "",
            f"![{alt}](docs/bench/set-get-{key}.svg)",
            "",
        ] + rows + [""]
        figs[key] = out
    if not body:
        return None, None
    return "\n".join(body), figs


# --- features: scripts, Pub/Sub, streams, GEO/HLL, TLS, ACL, SQL -------------


def bench_lines(text, vireo_port, redis_port, name_of):
    """Medians of "ROUND PORT TEST: N requests per second" lines (the
    redis-benchmark A/B scripts' output), as {name: (vireo, redis)};
    NAME_OF maps a test's text to its row name (None drops it)."""
    runs = {}
    for line in text.splitlines():
        m = re.match(r"(\d+) (\d+) (.*?): ([\d.]+) requests per second", line)
        if not m or name_of(m.group(3)) is None:
            continue
        side = {vireo_port: 0, redis_port: 1}.get(m.group(2))
        if side is not None:
            runs.setdefault(name_of(m.group(3)), ([], []))[side].append(float(m.group(4)))
    return {k: (med(v), med(r)) for k, (v, r) in runs.items()}


def pubsub_lines(text):
    """{subscribers: (vireo, redis)} medians of delivered messages/s."""
    runs = {}
    for m in re.finditer(r"^\d+ (vireo|redis) subscribers=(\d+): published [\d,.]+/s "
                         r"delivered ([\d,.]+)/s", text, re.M):
        side = 0 if m.group(1) == "vireo" else 1
        runs.setdefault(int(m.group(2)), ([], []))[side].append(number(m.group(3)))
    return {k: (med(v), med(r)) for k, (v, r) in runs.items()}


def ratio_cells(pair):
    if not pair or pair[0] is None or pair[1] is None or not pair[1]:
        return ["", "", ""]
    return [f"{pair[0]:,.0f}", f"{pair[1]:,.0f}", f"{pair[0] / pair[1]:.2f}"]


def feature_throughput(raw):
    """Rows of the pinned/all table and their figures."""
    ss = {mode: bench_lines(read(os.path.join(raw, f"script-stream-{mode}.txt")), "17501",
                            "17502", lambda t: t) for mode in ("pinned", "all")}
    ps = {mode: pubsub_lines(read(os.path.join(raw, f"pubsub-{mode}.txt")))
          for mode in ("pinned", "all")}
    geo_names = {"GEOADD": "GEOADD", "GEOSEARCH": "GEOSEARCH of 100 members",
                 "PFADD": "PFADD", "PFCOUNT": "PFCOUNT of 3 keys"}
    geo = bench_lines(read(os.path.join(raw, "geo-hll.txt")), "17611", "17612",
                      lambda t: geo_names.get(t.split()[0].upper()))
    stream = {}
    try:
        with open(os.path.join(raw, "stream.json"), encoding="utf-8") as f:
            ops = next(x for x in json.load(f)["figures"] if x["name"] == "ops/s")
            stream = {"pinned": (ops["a_median"], ops["b_median"])}
    except (OSError, ValueError, KeyError, StopIteration):
        pass
    tls = {}
    for m in re.finditer(r"^(SET|GET):\s+(\S+)\s+median\s+(\d+)", read(os.path.join(raw, "tls.txt")), re.M):
        side = 1 if m.group(2) == "redis" else 0
        tls.setdefault(m.group(1), [None, None])[side] = float(m.group(3)) * 1000
    rows = [
        ("EVALSHA, script doing GET + SET", "23", {m: ss[m].get("EVALSHA get+set") for m in ss}),
        ("EVALSHA, script doing 5 GET + 5 SET", "23", {m: ss[m].get("EVALSHA 10 cmds") for m in ss}),
        ("PUBLISH to 1 subscriber, delivered/s", "24", {m: ps[m].get(1) for m in ps}),
        ("PUBLISH to 100 subscribers, delivered/s", "24", {m: ps[m].get(100) for m in ps}),
        ("XADD to one of 100 streams", "25", {m: ss[m].get("XADD") for m in ss}),
        ("XRANGE of 10 entries", "25", {m: ss[m].get("XRANGE 10") for m in ss}),
        ("XREADGROUP + XACK consumer loop", "25", stream),
    ] + [(name, "26", {"pinned": geo.get(name)}) for name in geo_names.values()] + [
        (f"{cmd} over TLS", "27", {"pinned": tuple(tls[cmd])}) for cmd in ("SET", "GET") if cmd in tls
    ]
    lines, figs = [], {}
    for name, issue, by_mode in rows:
        if not any(by_mode.values()):
            continue
        cells = ratio_cells(by_mode.get("pinned")) + ratio_cells(by_mode.get("all"))
        lines.append(f"| {name} | {issue} | " + " | ".join(cells) + " |")
        figs[name] = {m: list(p) for m, p in by_mode.items() if p}
    return lines, figs


def feature_extras(raw):
    """Bytes per stream entry, the ACL check's cost and SQL: Markdown lines."""
    out = []
    text = read(os.path.join(raw, "stream.txt"))
    b = {m.group(1): int(m.group(2)) for m in re.finditer(r"bytes per entry port (\d+): (\d+)", text)}
    if "17531" in b and "17532" in b:
        out += ["", f"Bytes per stream entry, 1M entries of one small field (issue 25, lower is "
                f"better): Vireo {b['17531']}, Redis {b['17532']}."]
    acl = dict(re.findall(r"^(default|bench): (\d+) instructions", read(os.path.join(raw, "acl.txt")), re.M))
    if "default" in acl and "bench" in acl:
        d, u = int(acl["default"]), int(acl["bench"])
        out += ["", f"ACL check (issue 27; callgrind, pipelined SET and GET, one worker): "
                f"{d:,} instructions per command as the default user, {u:,} as a user with four "
                f"key patterns (+{(u - d) / d * 100:.1f}%; `bench/acl_cost.sh callgrind BIN`)."]
    sql = read(os.path.join(raw, "sql.txt"))
    big = re.search(r"100 KB rows: ([\d.]+) inserts/s = (\d+) MB/s", sql)
    small = re.search(r"small rows:\s+([\d.]+) inserts/s", sql)
    query = re.search(r"point query: ([\d.]+) queries/s", sql)
    if big and small and query:
        out += ["", f"SQL (issue 29; `bench/sql.sh`, one database key, `-c 8 -P 16`, Vireo only): "
                f"{big.group(2)} MB/s of 100 KB rows through `REDISQL.EXEC_STATEMENT` (RediSQL "
                f"published 800 MB/s on its machine), {float(small.group(1)):,.0f} small-row "
                f"inserts/s, {float(query.group(1)):,.0f} indexed point queries/s."]
    return out


def features(raw):
    raw = os.path.join(raw, "features")  # bench/features.sh's output directory
    lines, figs = feature_throughput(raw)
    extras = feature_extras(raw)
    if not lines and not extras:
        return None, None
    body = [
        "Pipelined (`-P 16`, 50 connections), medians of alternating rounds, in",
        "requests/s unless the row says otherwise. **Pinned**: Vireo with one",
        "worker and Redis on core 0, the client on core 1 (work per request).",
        "**All**: Vireo with its default workers, nothing pinned (what each",
        "server does with the machine; Redis runs every command on one thread).",
        "",
        "| figure | issue | Vireo pinned | Redis pinned | ratio | Vireo all | Redis all | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ] + lines + extras
    return "\n".join(body), figs


SECTIONS = {"memory": memory, "persistence": persistence, "maxmemory": maxmemory,
            "charts": charts, "features": features}


def section(name, raw, md, figures_path):
    body, figs = SECTIONS[name](raw)
    if body is None:
        print(f"report_md: no results for {name} in {raw}; BENCHMARKS.md keeps the old block",
              file=sys.stderr)
        return 1
    meta = meta_from_env()
    splice(md, name, header(meta, timed=name != "memory") + "\n\n" + body)
    all_figs = load_figures(figures_path)
    all_figs[name] = dict(figs, meta=meta)
    save_figures(figures_path, all_figs)
    return 0


# --- summary -----------------------------------------------------------------


def fmt(v, unit):
    """ops: ops/s; pct: percent; b: bytes; anything else: 2 decimals."""
    if v is None:
        return "–"
    if unit == "ops":
        return f"{v:,.0f}"
    if unit == "pct":
        return f"{v:.1f}%"
    if unit == "b":
        return f"{v:.1f}"
    return f"{v:.2f}"


def summary_rows(figs):
    """(what, Vireo, Redis, Vireo/Redis, section) for each headline figure."""
    rows = []

    def add(what, v, r, unit, link):
        ratio = "–" if v is None or not r else f"{v / r:.2f}" if v / r >= 0.01 else f"{v / r:.3f}"
        rows.append(f"| {what} | {fmt(v, unit)} | {fmt(r, unit)} | {ratio} | [↓](#{link}) |")

    suite = figs.get("suite", {}).get("rows", {})
    for name, p, label in [
        ("SET", "16", "SET/s, `-P 16`"),
        ("GET", "16", "GET/s, `-P 16`"),
        ("vireo bench SET:GET 1:10 zipf:0.99", "16", "SET:GET 1:10 zipf ops/s, `-P 16`"),
        ("GET", "1", "GET/s, `-P 1`"),
    ]:
        c = suite.get(name, {}).get(p)
        if c:
            add(label, c["vireo_ops"], c["redis_ops"], "ops", "throughput-per-command")
    for name, p in [("GET", "1"), ("GET", "16"), ("SET", "16"), ("LRANGE_100", "16")]:
        c = suite.get(name, {}).get(p)
        if c:
            add(f"server CPU µs per {name}, `-P {p}` (lower is better)", c["vireo_us"],
                c["redis_us"], "us", "throughput-per-command")
    mem = figs.get("memory", {})
    loads = mem.get("keys", [])
    for c in loads[:1] + loads[-1:] if len(loads) > 1 else loads:
        add(f"bytes per key: {c['load']} (lower is better)", c["vireo"], c["redis"], "b",
            "memory-per-key-and-per-element")
    for kind in ["hash", "zset"]:
        c = mem.get("elements", {}).get(kind)
        if c:
            add(f"bytes per {kind} element (lower is better)", c["vireo"], c["redis"], "b",
                "memory-per-key-and-per-element")
    per = figs.get("persistence", {})
    for mode in ["everysec", "always"]:
        c = per.get("aof", {}).get(mode)
        if c:
            add(f"SET/s with `appendfsync {mode}`", c["vireo"], c["redis"], "ops",
                "persistence")
    bg = per.get("bgsave", {})
    keys = per.get("bgsave_keys")
    for label, what, unit in [
        ("BGSAVE duration under SET load (s)", "BGSAVE of {k} keys under load, s (lower is better)", "s"),
        ("peak RSS during BGSAVE over before (%)", "memory added during that BGSAVE (lower is better)", "pct"),
        ("during / before", "SET/s during that BGSAVE / before", "x"),
    ]:
        c = bg.get(label)
        if c:
            add(what.format(k=f"{keys:,}" if keys else "N"), c["vireo"], c["redis"], unit,
                "persistence")
    mm = figs.get("maxmemory", {})
    if mm.get("vireo") and mm.get("redis"):
        add("SET/s at `maxmemory 100mb` allkeys-lru", mm["vireo"]["limited"],
            mm["redis"]["limited"], "ops", "throughput-at-maxmemory")
        add("… as a share of the same server unlimited", mm["vireo"]["ratio"],
            mm["redis"]["ratio"], "x", "throughput-at-maxmemory")
    return rows


def summary(md, figures_path):
    figs = load_figures(figures_path)
    rows = summary_rows(figs)
    if not rows:
        print("report_md: no figures yet; run bench/report.sh", file=sys.stderr)
        return 1
    dates = sorted({s["meta"]["DATE"] for s in figs.values() if "meta" in s and "DATE" in s["meta"]})
    commits = sorted({s["meta"]["COMMIT"] for s in figs.values()
                      if "meta" in s and "COMMIT" in s["meta"]})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    redis = next((s["meta"]["REDIS"] for s in figs.values() if "REDIS" in s.get("meta", {})), "")
    busy = [name for name, sec in figs.items()
            if name != "memory" and load_text(sec.get("meta", {}))[1]]
    body = [
        f"Figures of {when}, commit{'s' if len(commits) > 1 else ''} {', '.join(commits)};"
        " each section below says how it was measured and by which command."
        + (f" Other work shared the machine during the timed sections ({', '.join(busy)}):"
           " take their ratios as rough; CPU per request and bytes are the steadier figures."
           if busy else ""),
        "",
        f"| figure | Vireo | Redis {redis} | Vireo/Redis | details |",
        "|---|---|---|---|---|",
    ] + rows
    splice(md, "summary", "\n".join(body))
    return 0


def suite(summary_json, figures_path):
    try:
        with open(summary_json, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"report_md: cannot read {summary_json}: {e}", file=sys.stderr)
        return 1
    figs = load_figures(figures_path)
    figs["suite"] = doc
    save_figures(figures_path, figs)
    return 0


def main():
    args = sys.argv[1:]
    if len(args) == 5 and args[0] == "section" and args[1] in SECTIONS:
        return section(*args[1:])
    if len(args) == 3 and args[0] == "suite":
        return suite(*args[1:])
    if len(args) == 3 and args[0] == "summary":
        return summary(*args[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
