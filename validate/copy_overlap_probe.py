#!/usr/bin/env python3
"""When does a device-to-device copy run while a GEMM fills the GPU?

On an H200 the runtime's one-GPU all-to-all copies (cudaMemcpyAsync, device to device) issued
beside an expert GEMM took about the GEMM's time instead of their own (validate/results/
h200-2026-11-26, call 12: combines of 188-194 us against 9.7 us alone). This probe measures, with
CUDA events, a copy issued on a second stream just after a GEMM on the first: when it starts and
ends relative to the GEMM, for copies made by cudaMemcpyAsync (tensor.copy_) and by an elementwise
kernel (torch.add), and GEMMs of two sizes. It prints one line per case; run it on a GPU:

    python3 validate/copy_overlap_probe.py
"""
import statistics
import sys

import torch


def timed_pair(gemm, copy, reps=20):
    """Median (gemm ms, copy start after gemm start ms, copy end after gemm end ms, copy alone ms)."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    rows = []
    for _ in range(reps):
        torch.cuda.synchronize()
        with torch.cuda.stream(s1):
            ev[0].record()
            gemm()
            ev[1].record()
        with torch.cuda.stream(s2):
            ev[2].record()
            copy()
            ev[3].record()
        torch.cuda.synchronize()
        rows.append((ev[0].elapsed_time(ev[1]), ev[0].elapsed_time(ev[2]), ev[1].elapsed_time(ev[3])))
    alone = []
    for _ in range(reps):
        torch.cuda.synchronize()
        ev[2].record()
        copy()
        ev[3].record()
        torch.cuda.synchronize()
        alone.append(ev[2].elapsed_time(ev[3]))
    med = lambda i: statistics.median(r[i] for r in rows)  # noqa: E731
    return med(0), med(1), med(2), statistics.median(alone)


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("# gemm n, copy, copy MiB: gemm ms | copy event after gemm start ms | copy end - gemm end ms | copy alone ms")
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        gemm = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        for mib in (1, 16, 256):
            src = torch.randn(mib << 18, device="cuda")  # fp32: 4 bytes each
            dst = torch.empty_like(src)
            for name, copy in (("memcpy", lambda: dst.copy_(src)), ("kernel", lambda: torch.add(src, 0.0, out=dst))):
                for _ in range(3):
                    gemm()
                    copy()
                g, start, end, alone = timed_pair(gemm, copy)
                print(f"{n} {name} {mib}: {g:.3f} | {start:.3f} | {end:+.3f} | {alone:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
