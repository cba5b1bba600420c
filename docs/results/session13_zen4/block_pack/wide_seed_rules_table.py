#!/usr/bin/python3
# The best of tune's matmul seeds per shape for wide shallow shapes (n >= 1024, k < 1024), from matmul_bench --schedules output,
# under the seed rules of agents/guided_search.cpp tune_seeds() for these shapes written out by hand (2026-11-26):
# "now" before, "mn16" with 16x16 mn added for k < 512 (as committed), the rest alternatives not taken.
# Usage: wide_seed_rules_table.py BENCH_OUTPUT.txt
import sys
from bench_output import read, seed_table
def seeds(m,n,k,variant):
    t=['8x32 mn','4x64 nm' if (k>=512 and m>16) else '4x64 mn','16x16 nm' if (n>=1024 and m>16 and k%1024) else '8x16 nm']
    if k>=512 and k<1024 and m>16:
        t+=['16x16 mn', '4x64 kb64 nkm' if n%16 else '4x64 kb128 nkm']
    if n>=1024 and m>=32:
        t.append('4x64 nm pack')
        if n%16 and k<1024: t.append('8x16 mn pack')
    if variant=='mn16' and k<512 and m>16: t.append('16x16 mn')
    if variant=='swap' and k<512 and m>16 and '8x16 mn pack' in t: t[t.index('8x16 mn pack')]='16x16 mn'
    if variant=='drop': t=[x for x in t if x!='8x16 mn pack']
    if variant=='mn16drop' and k<512 and m>16: t=[x for x in t if x!='8x16 mn pack']+['16x16 mn']
    return t
seed_table(read(sys.argv[1]), seeds, ['now', 'mn16', 'swap', 'drop', 'mn16drop'], show_onednn=False)
