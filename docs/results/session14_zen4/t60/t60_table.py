#!/usr/bin/python3
# tune against tile given 60 s on the real-model set, from two compare runs (2026-11-26): FULL with
# policy,tile,onednn (action space full, 16 steps: the policy's), LAYOUT with tile,onednn (--space layout
# --steps 64: tile's packed members too). Judged figures (median of compare's rounds); the layout run's
# tile is taken through each run's oneDNN and also in GFLOPS. Usage: t60_table.py FULL.csv LAYOUT.csv
import csv, math, statistics, sys
def load(p):
    d = {}
    for r in csv.DictReader(open(p)):
        j = r.get('judged_gflops', '').split()
        d.setdefault(r['benchmark'], {})[r['method']] = statistics.median(map(float, j)) if j else float(r['gflops'])
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
rows = []
for s in sorted(a):
    pol, tf, oa = a[s]['policy'], a[s]['tile'], a[s]['onednn']
    tl, ob = b[s]['tile'], b[s]['onednn']
    best_via = max(tf / oa, tl / ob)  # the better tile, through each run's oneDNN
    rows.append(((pol / oa) / best_via, s, pol / oa, pol / tf, (pol / oa) / (tl / ob), pol / tl))
rows.sort()
print('| shape | tune / oneDNN | / tile full | / tile layout (via oneDNN) | / tile layout (GFLOPS) |')
print('|---|---:|---:|---:|---:|')
for x in rows: print(f'| {x[1]} | {x[2]:.3f} | {x[3]:.3f} | {x[4]:.3f} | {x[5]:.3f} |')
gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f'\ngeomean: tune / oneDNN {gm([x[2] for x in rows]):.3f}; / tile full {gm([x[3] for x in rows]):.3f}; '
      f'/ tile layout via oneDNN {gm([x[4] for x in rows]):.3f}, in GFLOPS {gm([x[5] for x in rows]):.3f}; '
      f'under 0.97x the better tile (via oneDNN): {sum(x[0] < 0.97 for x in rows)} of {len(rows)}')
