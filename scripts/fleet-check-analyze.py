import json, collections, os
DIR = os.environ.get('FLEET_DIR', '/tmp/fanout-fleet')
rows = [json.loads(l) for l in open(DIR + '/deliveries.jsonl')]
parts = {}
for line in open(DIR + '/keyparts.txt'):
    k, p = line.split(); parts[k] = int(p)
tok2key = {("%02x" % i) * 32: f"act-{i}" for i in range(40)}
by = collections.defaultdict(list)
for r in rows:
    if r.get('kind') == 'device': by[tok2key.get(r['token'], r['token'])].append(r['time'])
t0 = min(min(v) for v in by.values())
tl = {}
for line in open(DIR + '/timeline.log'):
    if 'joins at' in line: tl['join'] = float(line.split()[-1])
    if 'SIGTERM at' in line: tl['term'] = float(line.split()[-1])
print("deliveries", len(rows), "activities", len(by))
gaps = collections.defaultdict(float)
where = {}
for k, ts in by.items():
    ts.sort()
    for a, b in zip(ts, ts[1:]):
        if b - a > gaps[parts.get(k, -1)]:
            gaps[parts.get(k, -1)] = b - a; where[parts.get(k, -1)] = (a - t0, b - t0)
for p in sorted(gaps): print(f"partition {p:2d}: largest gap {gaps[p]:6.1f} s  from +{where[p][0]:.1f} to +{where[p][1]:.1f}")
print("B joined at +%.1f, SIGTERM at +%.1f" % (tl['join'] - t0, tl['term'] - t0))
# duplicates: same token+timestamp delivered more than once
dup = collections.Counter((r['token'], r['timestamp']) for r in rows)
print("duplicate sends (same token and timestamp):", sum(c - 1 for c in dup.values() if c > 1))
# Kept partitions during B's join (until B's first assignment)
lo, hi = tl['join'], tl['join'] + 88
kept = collections.defaultdict(float)
for k, ts in by.items():
    w = [t for t in ts if lo - 5 <= t <= hi]
    for a, b in zip(w, w[1:]): kept[parts[k]] = max(kept[parts[k]], b - a)
print("largest gap per partition while B joined (join .. join+88 s):", {p: round(g, 1) for p, g in sorted(kept.items())})
last = {}
for r in rows:
    k = tok2key[r['token']]; last[k] = max(last.get(k, -1), int(json.loads(r['aps'])['content-state']['phase'].split()[1]))
print("final step on every device:", sorted(set(last.values())))
