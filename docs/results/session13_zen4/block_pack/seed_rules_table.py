# The best of tune's matmul seeds per shape, from matmul_bench --schedules output, under the seed rules of
# agents/guided_search.cpp tune_seeds() for these shapes written out by hand (2026-11-26): "now" before this session,
# "kb64" with 4x64 kb64 nkm for kb128 where 16 does not divide n and k >= 1024, "kb64all" also for 512 <= k < 1024.
# Usage: seed_rules_table.py BENCH_OUTPUT.txt
import re, sys, collections, math
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m=re.match(r'^(mm\S+) (.+?)\s+([\d.]+) GFLOPS',line)
    if m: d[m.group(1)][m.group(2).strip()]=float(m.group(3))
def seeds(m,n,k,variant):
    t=['8x32 mn','4x64 nm' if (k>=512 and m>16) else '4x64 mn','16x16 nm' if (n>=1024 and m>16 and k%1024) else '8x16 nm']
    if k>=512 and k<1024 and m>16:
        t+=['16x16 mn', '4x64 kb128 nkm' if n>=64 else '8x32 kb256 kmn']
        if variant=='kb64all' and n%16 and n>=64: t[-1]='4x64 kb64 nkm'
    if k>=1024 and m>16:
        t+=['8x32 kb128 kmn','16x16 mn']; t.insert(0,'4x64 kb128 nkm')
    if n>=1024 and m>=32:
        t.append('4x64 nm pack')
        if k>=2048: t.append('8x32 kb256 nkm pack')
        if n%16 and k<1024: t.append('8x16 mn pack')
    if variant=='kb64' and k>=1024 and m>16 and n%16: t[0]='4x64 kb64 nkm'
    if variant=='kb64all' and k>=512 and m>16 and n%16: t=[x.replace('4x64 kb128 nkm','4x64 kb64 nkm') for x in t]
    if variant=='swap' and k>=1024 and m>=64 and n%16: t[0]='4x64 kb128 nkm pack'
    return t
res=collections.defaultdict(list)
for s,r in d.items():
    o=r.get('oneDNN'); m,n,k=map(int,s[2:].split('_'))
    best=max(v for kk,v in r.items() if kk!='oneDNN')
    row=[s.ljust(18)]
    for var in ['now','kb64','kb64all']:
        b=max(r.get(x,0) for x in seeds(m,n,k,var))
        res[var].append(b/best); row.append(f'{var} {b/best:.3f} ({b/o:.3f}x oDNN)')
    print(*row)
for var,v in res.items(): print(var, 'geomean', round(math.exp(sum(map(math.log,v))/len(v)),3),'worst',round(min(v),3))
