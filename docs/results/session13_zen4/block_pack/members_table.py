# Ratios of matmul_bench --schedules output (one process): each named member and the fastest member against oneDNN.
# Usage: members_table.py BENCH_OUTPUT.txt "member,member,..."
import re,sys,collections,math
d=collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m=re.match(r'^(mm\S+) (.+?)\s+([\d.]+) GFLOPS',line)
    if m: d[m.group(1)][m.group(2).strip()]=float(m.group(3))
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
    if g[k]: print(k, 'geomean vs best member', round(math.exp(sum(map(math.log,g[k]))/len(g[k])),3), 'worst', round(min(g[k]),3))
