# The best of tune's matmul seeds (the rules of agents/guided_search.cpp tune_seeds() for these shapes, 2026-11-26,
# written out by hand: "now" before, "swap" as committed, "add" the new seed added instead) per shape, from
# matmul_bench --schedules output. Usage: seed_rules_table.py BENCH_OUTPUT.txt
import re,sys,collections,math
d=collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m=re.match(r'^(mm\S+) (.+?)\s+([\d.]+) GFLOPS',line)
    if m: d[m.group(1)][m.group(2).strip()]=float(m.group(3))
def seeds(m,n,k,variant):
    t=['8x32 mn','4x64 nm' if (k>=512 and m>16) else '4x64 mn','16x16 nm' if (n>=1024 and m>16 and k%1024) else '8x16 nm']
    if k>=1024 and m>16:
        t+=['8x32 kb128 kmn','16x16 mn']; t.insert(0,'4x64 kb128 nkm')
    if n>=1024 and m>=32:
        t.append('4x64 nm pack')
        if k>=2048: t.append('8x32 kb256 nkm pack')
        if n%16 and k<1024: t.append('8x16 mn pack')
    if variant=='add' and k>=1024 and m>=32 and n%16: t.append('4x64 kb128 nkm pack')
    if variant=='swap' and k>=1024 and m>=32 and n%16: t[0]='4x64 kb128 nkm pack'
    return t
res=collections.defaultdict(list)
for s,r in d.items():
    o=r.get('oneDNN'); m,n,k=map(int,s[2:].split('_'))
    best=max(v for kk,v in r.items() if kk!='oneDNN')
    row=[s.ljust(18)]
    for var in ['now','add','swap']:
        b=max(r.get(x,0) for x in seeds(m,n,k,var))
        res[var].append(b/best); row.append(f'{var} {b/best:.3f} ({b/o:.3f}x oDNN)')
    print(*row)
for var,v in res.items(): print(var, 'geomean', round(math.exp(sum(map(math.log,v))/len(v)),3),'worst',round(min(v),3))
