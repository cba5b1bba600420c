#!/usr/bin/python3
# The best of tune's matmul seeds per shape, from matmul_bench --schedules output, under the seed rules of
# agents/guided_search.cpp tune_seeds() written out by hand for shapes with 16 < m < 512, k >= 512, k not a multiple
# of 1024, n >= 64 (2026-11-26): "now" as at the start of the session, "plus8" with 8x32 kb128 nkm as one more seed,
# "plus8kb" with 8x32 nkm on 4x64 nkm's k block (64 where 16 does not divide n), "swap8" 8x32 kb128 nkm instead of
# 4x64 nkm. Usage: nkm8_table.py BENCH_OUTPUT.txt
import sys
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../session13_zen4/block_pack'))
from bench_output import read, seed_table
def seeds(m, n, k, variant):
    assert 16 < m < 512 and k >= 512 and k % 1024 and n >= 64
    kb = 64 if n % 16 else 128
    nkm = f'4x64 kb{kb} nkm'
    t = ['8x32 mn', '4x64 nm', '16x16 nm' if n >= 1024 else '8x16 nm']
    if k < 1024: t += ['16x16 mn', nkm]
    else: t = [nkm] + t + ['8x32 kb128 kmn', '16x16 mn']
    if n >= 1024 and m >= 32:
        t.append('4x64 nm pack')
        if k >= 2048: t.append('8x32 kb256 nkm pack')
        if n % 16 and k < 1024: t.append('8x16 mn pack')
    if variant == 'plus8': t.append('8x32 kb128 nkm')
    if variant == 'plus8kb': t.append(f'8x32 kb{kb} nkm')
    if variant == 'swap8': t = ['8x32 kb128 nkm' if x == nkm else x for x in t]
    return t
seed_table(read(sys.argv[1]), seeds, ['now', 'plus8', 'plus8kb', 'swap8'], show_onednn=True)
