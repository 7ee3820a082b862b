#!/usr/bin/env python3
"""Which kernel, grid and resources cuBLAS picks for each GEMM shape of `moesim_sm_share_probe --shapes` and `--waves`.

The shape sweep measures how much of its speed a bf16 GEMM keeps beside a communication kernel
that holds a few SMs. Whether a GEMM's CTAs can share an SM with a 512-thread communication CTA,
and how its tiles are spread over its CTAs, depends on the kernel cuBLAS runs: its grid (one CTA
per SM for Hopper's persistent kernels, or one per tile), its registers per thread and shared
memory. This probe runs each shape once through torch.matmul under torch.profiler and prints
what the profiler's trace records of every kernel launched: name, grid, block, registers per
thread, shared memory, and the GPU time. The operands are laid out so that cuBLAS sees the same
column-major m x n x k problem as the C++ probe's cublasGemmEx (PyTorch's cuBLASLt path may still
pick another kernel than cublasGemmEx; the name says which). Run it on a GPU:

    python3 validate/gemm_kernel_probe.py
"""
import json
import os
import sys
import tempfile

import torch

# (m, n, k) as cublasGemmEx sees them: runtime/bench/sm_share_probe.cu's kShapeSweep and kWaveSweep.
SHAPES = [(256, 2048, 2048), (512, 2048, 2048), (1024, 2048, 2048), (2048, 2048, 2048),
          (4096, 2048, 2048), (8192, 2048, 2048), (16384, 2048, 2048), (4096, 2048, 512),
          (4096, 2048, 8192), (4096, 2048, 16384), (4096, 256, 4096), (4096, 1024, 4096),
          (4096, 4096, 4096), (4096, 8192, 4096), (1024, 1024, 1024), (8192, 8192, 8192),
          (2048, 768, 2048), (4096, 7168, 2048), (32768, 2048, 2048)]
# (batch, m, n, k) as cublasGemmStridedBatchedEx sees them: kBatchedSweep's batched launches.
BATCHED = [(4, 2048, 768, 2048), (8, 2048, 768, 2048), (16, 1024, 768, 2048), (2, 1024, 2048, 7168),
           (4, 1024, 2048, 7168), (8, 1024, 2048, 7168), (4, 4096, 2048, 2048)]


def kernels_of(m, n, k, batch=0):
    from torch.profiler import ProfilerActivity, profile
    # Column-major C(m x n) = A(m x k) B(k x n) is row-major C^T(n x m) = B^T(n x k) A^T(k x m);
    # with a batch, torch.matmul of 3-d tensors is one strided-batched GEMM.
    lead = (batch,) if batch else ()
    bt = torch.randn(*lead, n, k, device="cuda", dtype=torch.bfloat16)
    at = torch.randn(*lead, k, m, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(bt, at)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(bt, at)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    return [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    p = torch.cuda.get_device_properties(0)
    print(f"# {p.name}, {p.multi_processor_count} SMs, torch {torch.__version__}")
    print("# m x n x k | us | grid | block | regs/thread | shared memory B | blocks/SM | kernel")
    for batch, m, n, k in [(0, *s) for s in SHAPES] + BATCHED:
        for e in kernels_of(m, n, k, batch):
            a = e.get("args", {})
            print(f"{f'{batch} x ' if batch else ''}{m}x{n}x{k} | {e.get('dur', 0):.1f} | {a.get('grid')} | {a.get('block')} | "
                  f"{a.get('registers per thread')} | {a.get('shared memory')} | {a.get('blocks per SM')} | "
                  f"{e.get('name', '')[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
