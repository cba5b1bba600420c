#!/usr/bin/env python3
"""A tuned kernel on PyTorch tensors: tune a shape into a store, build the kernel library, and
call its lt_sgemm on torch tensors, checked against torch.matmul. Tensor.numpy() shares the
tensor's memory, so a contiguous float32 CPU tensor reaches the kernel with no copy, and the
result is written straight into a torch tensor through out= (a transposed or other strided
tensor is copied first, as any strided array).

    build/cli/looptool tune --matmul 128,256,192 --store /tmp/s.sqlite
    build/cli/looptool lib build --store /tmp/s.sqlite --out /tmp/kernels
    PYTHONPATH=build/python /usr/bin/python3 python/examples/torch_kernel.py /tmp/kernels
"""

import argparse
import time

import torch

import looptune


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", help="directory `looptool lib build --out` wrote (or its .so)")
    ap.add_argument("--shape", default=None,
                    help="M,N,K to multiply (default: each matmul the library has a kernel for)")
    args = ap.parse_args()

    lib = looptune.load_library(args.library)
    shapes = [tuple(int(s) for s in args.shape.split(","))] if args.shape else [
        tuple(k["shape"]) for k in lib.kernels() if k["kind"] == "matmul"]
    if not shapes:
        raise SystemExit("error: the library has no matmul kernel; give --shape M,N,K")
    torch.manual_seed(0)
    for m, n, k in shapes:
        a, b = torch.rand(m, k) * 2 - 1, torch.rand(k, n) * 2 - 1
        c = torch.empty(m, n)
        lib.sgemm(a.numpy(), b.numpy(), out=c.numpy())  # the first call touches c's pages
        calls, t0 = 10, time.perf_counter()
        for _ in range(calls):
            lib.sgemm(a.numpy(), b.numpy(), out=c.numpy())
        seconds = (time.perf_counter() - t0) / calls
        want = torch.matmul(a.double(), b.double())
        err = (c.double() - want).abs().max().item()
        ok = torch.allclose(c.double(), want, rtol=1e-4, atol=1e-4 * k)
        print(f"{m}x{n}x{k}: max |error| {err:.2e} vs torch.matmul ({'ok' if ok else 'MISMATCH'}), "
              f"{2 * m * n * k / seconds / 1e9:.1f} GFLOPS per call")
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
