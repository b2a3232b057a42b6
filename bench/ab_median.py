import collections,statistics,sys,re
d=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    m=re.match(r"(\d+) (\d+) (.*?): ([\d.]+) requests per second", l)
    if not m: continue
    d[m.group(3)][m.group(2)].append(float(m.group(4)))
for n,v in d.items():
    a=statistics.median(v['17501']); b=statistics.median(v['17502'])
    print(f"| {n} | {a:,.0f} | {b:,.0f} | {a/b:.2f} |")
