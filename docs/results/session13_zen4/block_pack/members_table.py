#!/usr/bin/python3
# Ratios of matmul_bench --schedules output (one process): each named member and the fastest member against oneDNN.
# Usage: members_table.py BENCH_OUTPUT.txt "member,member,..."
import sys, collections
from bench_output import read, geomean
d=read(sys.argv[1])
keys=sys.argv[2].split(',')
print('shape'.ljust(18),'best member'.ljust(26),'best/oDNN', *[k[:22].rjust(22) for k in keys])
g=collections.defaultdict(list)
for s,r in d.items():
    o=r.pop('oneDNN',None)
    if not o: continue
    b=max(r,key=r.get)
    row=[s.ljust(18),b.ljust(26),f'{r[b]/o:9.3f}']
    for k in keys:
        v=r.get(k)
        row.append(f'{v/o:22.3f}' if v else ' '*22)
        if v: g[k].append(v/r[b])
    print(*row)
for k in keys:
    if g[k]: print(k, 'geomean vs best member', round(geomean(g[k]),3), 'worst', round(min(g[k]),3))
