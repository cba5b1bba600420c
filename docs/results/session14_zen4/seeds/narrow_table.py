#!/usr/bin/python3
# The best of tune's matmul seeds per shape on tall narrow shapes (m >= 512, 32 <= n <= 192), from matmul_bench
# --schedules output, under the seed rules of agents/guided_search.cpp tune_seeds() written out by hand for them
# (2026-11-26): "now", "nm16" with 16x16 nm as one more seed, "mn16" with 16x16 mn. Usage: narrow_table.py OUT.txt
import sys
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../session13_zen4/block_pack'))
from bench_output import read, seed_table
def seeds(m, n, k, variant):
    assert m >= 512 and 32 <= n <= 192
    kb = 64 if n % 16 else 128
    t = ['8x32 mn', '4x64 nm' if k >= 512 else '4x64 mn', '8x16 nm']
    if 512 <= k < 1024: t += ['16x16 mn', f'4x64 kb{kb} nkm']
    if k >= 1024: t = [f'4x64 kb{kb} nkm'] + t + ['8x32 kb128 kmn', '16x16 mn']
    if variant == 'nm16': t.append('16x16 nm')
    if variant == 'mn16': t.append('16x16 mn')
    return t
seed_table(read(sys.argv[1]), seeds, ['now', 'nm16', 'mn16'], show_onednn=True)
