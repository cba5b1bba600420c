#!/usr/bin/python3
# The best of tune's matmul seeds per shape, from matmul_bench --schedules output, under the seed rules of
# agents/guided_search.cpp tune_seeds() for these shapes written out by hand (2026-11-26): "now" before this session,
# "kb64" with 4x64 kb64 nkm for kb128 where 16 does not divide n and k >= 1024, "kb64all" also for 512 <= k < 1024.
# Usage: seed_rules_table.py BENCH_OUTPUT.txt
import sys
from bench_output import read, seed_table
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
seed_table(read(sys.argv[1]), seeds, ['now', 'kb64', 'kb64all'], show_onednn=True)
