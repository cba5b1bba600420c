# Reading matmul_bench --schedules output, shared by the tables in this directory.
import collections, math, re


def read(path):
    """{shape: {schedule or "oneDNN": GFLOPS}} from one matmul_bench --schedules run."""
    d = collections.defaultdict(dict)
    for line in open(path):
        m = re.match(r'^(mm\S+) (.+?)\s+([\d.]+) GFLOPS', line)
        if m: d[m.group(1)][m.group(2).strip()] = float(m.group(3))
    return d


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def seed_table(d, seeds, variants, show_onednn):
    """Per shape, the best of seeds(m, n, k, variant) against the fastest schedule measured, per
    variant; then each variant's geomean and worst."""
    res = collections.defaultdict(list)
    for s, r in d.items():
        o = r.get('oneDNN'); m, n, k = map(int, s[2:].split('_'))
        best = max(v for kk, v in r.items() if kk != 'oneDNN')
        row = [s.ljust(18)]
        for var in variants:
            b = max(r.get(x, 0) for x in seeds(m, n, k, var))
            res[var].append(b / best)
            row.append(f'{var} {b/best:.3f} ({b/o:.3f}x oDNN)' if show_onednn else f'{var} {b/best:.3f}')
        print(*row)
    for var, v in res.items(): print(var, 'geomean', round(geomean(v), 3), 'worst', round(min(v), 3))
