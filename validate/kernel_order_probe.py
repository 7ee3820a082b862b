#!/usr/bin/env python3
"""How do GEMMs issued at once on several streams of one GPU share it?

The simulator runs the kernels of a loopback node's virtual ranks (N ranks on one GPU) side by
side, each at 1/k of its speed (processor sharing): k equal kernels all end together, at k times
one kernel's time. A GPU hands its SMs to kernels in the order they arrived, so GEMMs that fill
the GPU may rather run one after another, the i-th ending at i times one kernel's time. The two
give the same total but different end times per rank, and so different times at which each
rank's next work (an offload over PCIe, a copy) can start. This probe issues the same kernel on
k = 1, 2, 4 and 8 streams at once (a GPU-filling GEMM, expert-sized batched GEMMs, a memory-bound
kernel) and prints, per stream, when its kernel ended after the first stream's start (CUDA
events; medians over repetitions). Run it on a GPU:

    python3 validate/kernel_order_probe.py
"""
import statistics
import sys

import torch


def ends_on_streams(gemm, k, reps=15):
    """Median end time (ms after the first stream's start event) of the GEMM on each of k streams,
    sorted, and the median time of one GEMM alone."""
    streams = [torch.cuda.Stream() for _ in range(k)]
    start = torch.cuda.Event(enable_timing=True)
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
    rows = []
    for _ in range(reps + 2):  # the first two warm up
        torch.cuda.synchronize()
        with torch.cuda.stream(streams[0]):
            start.record()
        for s in streams[1:]:
            s.wait_event(start)  # every stream released by the same event
        for s, e in zip(streams, ends):
            with torch.cuda.stream(s):
                gemm()
                e.record()
        torch.cuda.synchronize()
        rows.append(sorted(start.elapsed_time(e) for e in ends))
    rows = rows[2:]
    return [statistics.median(r[i] for r in rows) for i in range(k)]


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    print("# case, k streams: ends of the k GEMMs after the common start (ms, sorted); "
          "fifo = one after another, shared = all at k x alone")
    cases = []
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cases.append(("bf16 8192^3", lambda a=a, b=b: torch.matmul(a, b)))
    # MoE-GPT-S's experts on one virtual rank of eight (8 experts, TF32): fc1 with 32 to 2,048
    # rows per expert (128: one chunk of n = 4 at 4,096 tokens; 512: the whole batch).
    for rows in (32, 128, 512, 2048):
        x = torch.randn(8, rows, 1024, device="cuda")
        w = torch.randn(8, 1024, 4096, device="cuda")
        cases.append((f"tf32 batched 8 x {rows}x1024x4096", lambda x=x, w=w: torch.bmm(x, w)))
    # A memory-bound kernel: the activation over one rank's fc1 output (8 x 512 x 4096 fp32).
    h = torch.randn(8, 512, 4096, device="cuda")
    cases.append(("fp32 gelu 64 MiB", lambda h=h: torch.nn.functional.gelu(h)))
    for name, gemm in cases:
        alone = ends_on_streams(gemm, 1)[0]
        for k in (2, 4, 8):
            ends = ends_on_streams(gemm, k)
            shown = " ".join(f"{t:.3f}" for t in ends)
            print(f"{name}, k={k}: alone {alone:.3f} | ends {shown} | last/alone {ends[-1] / alone:.2f}, "
                  f"first/alone {ends[0] / alone:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
