#!/usr/bin/env python3
"""Is the time of a small GEMM issued back to back the GPU's or the host's?

`moesim calibrate` times GEMMs issued back to back from one host thread; no GEMM of its H200
tables took under 7-9 us, where the datasheet shape model gives 4-5 us (docs/validation.md, "The
datasheet GEMM model against the H200's own tables"). This probe times the same small GEMMs issued
back to back eagerly (each call through the host: PyTorch's dispatch, cuBLAS's call, the launch)
and captured once in a CUDA graph and replayed (the GPU's time alone, with the graph's launch
gaps), per GEMM, with CUDA events over 200 of them (medians of 5 runs). Run it on a GPU:

    python3 validate/gemm_floor_probe.py
"""
import statistics
import sys

import torch

COUNT = 200


def per_gemm_us(run, reps=5):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps + 1):  # the first warms up
        torch.cuda.synchronize()
        start.record()
        run()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / COUNT)
    return statistics.median(times[1:])


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("# shape (batch x m x n x k), dtype: us per GEMM issued eagerly | replayed from a CUDA graph")
    shapes = [(1, 64, 1024, 8, torch.bfloat16), (1, 16, 4096, 16, torch.bfloat16), (1, 256, 256, 256, torch.bfloat16),
              (1, 1024, 1024, 1024, torch.bfloat16), (1, 2048, 2048, 2048, torch.bfloat16),
              (128, 16, 16, 16, torch.bfloat16), (8, 128, 4096, 1024, torch.bfloat16),
              (1, 32, 2048, 8, torch.float32), (32, 256, 16, 256, torch.float32), (8, 128, 4096, 1024, torch.float32)]
    stream = torch.cuda.Stream()
    for b, m, n, k, dtype in shapes:
        x = torch.randn(b, m, k, device="cuda", dtype=dtype)
        w = torch.randn(b, k, n, device="cuda", dtype=dtype)
        out = torch.empty(b, m, n, device="cuda", dtype=dtype)

        def eager(x=x, w=w, out=out):
            for _ in range(COUNT):
                torch.bmm(x, w, out=out)

        with torch.cuda.stream(stream):
            eager()  # warm cuBLAS's handle and workspace on the capturing stream
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            eager()
        name = {torch.bfloat16: "bf16", torch.float32: "tf32"}[dtype]
        print(f"{b} x {m}x{n}x{k}, {name}: {per_gemm_us(eager):.2f} | {per_gemm_us(graph.replay):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
