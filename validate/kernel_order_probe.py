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

    python3 validate/kernel_order_probe.py            # the kernels of call 2 of 2026-11-27
    python3 validate/kernel_order_probe.py --sweep    # more sizes (k = 2, 8), and pairs of
                                                      # different kernels, the first issued first
"""
import statistics
import sys

import torch


def ends_on_streams(kernels, reps=15):
    """Median end time (ms after the common start event) of kernels[i], issued on stream i, in
    stream order (issued in that order)."""
    streams = [torch.cuda.Stream() for _ in kernels]
    start = torch.cuda.Event(enable_timing=True)
    ends = [torch.cuda.Event(enable_timing=True) for _ in kernels]
    rows = []
    for _ in range(reps + 2):  # the first two warm up
        torch.cuda.synchronize()
        with torch.cuda.stream(streams[0]):
            start.record()
        for s in streams[1:]:
            s.wait_event(start)  # every stream released by the same event
        for s, e, kernel in zip(streams, ends, kernels):
            with torch.cuda.stream(s):
                kernel()
                e.record()
        torch.cuda.synchronize()
        rows.append([start.elapsed_time(e) for e in ends])
    rows = rows[2:]
    return [statistics.median(r[i] for r in rows) for i in range(len(kernels))]


def basic_cases():
    """The kernels of call 2 of 2026-11-27: a GPU-filling GEMM, MoE-GPT-S's experts on one virtual
    rank of eight, a memory-bound kernel."""
    cases = []
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cases.append(("bf16 8192^3", lambda a=a, b=b: torch.matmul(a, b)))
    # 8 experts, TF32: fc1 with 32 to 2,048 rows per expert (128: one chunk of n = 4 at 4,096
    # tokens; 512: the whole batch).
    for rows in (32, 128, 512, 2048):
        cases.append(batched(rows))
    # The activation over one rank's fc1 output (8 x 512 x 4096 fp32).
    cases.append(gelu(64))
    return cases


def batched(rows):
    x = torch.randn(8, rows, 1024, device="cuda")
    w = torch.randn(8, 1024, 4096, device="cuda")
    return (f"tf32 batched 8 x {rows}x1024x4096", lambda x=x, w=w: torch.bmm(x, w))


def square(n):
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return (f"bf16 {n}^3", lambda a=a, b=b: torch.matmul(a, b))


def gelu(mib):
    h = torch.randn(mib << 18, device="cuda")  # fp32: 4 bytes each
    return (f"fp32 gelu {mib} MiB", lambda h=h: torch.nn.functional.gelu(h))


def sweep_cases():
    """More sizes of each kind, from launch-bound to GPU-filling, to fit how much consecutive
    kernels overlap against their size."""
    return ([batched(r) for r in (16, 64, 256, 1024, 4096)] + [square(n) for n in (1024, 2048, 4096)] +
            [gelu(m) for m in (4, 16, 256)])


def report_same(cases, ks):
    for name, kernel in cases:
        alone = ends_on_streams([kernel])[0]
        for k in ks:
            ends = sorted(ends_on_streams([kernel] * k))
            shown = " ".join(f"{t:.3f}" for t in ends)
            print(f"{name}, k={k}: alone {alone:.3f} | ends {shown} | last/alone {ends[-1] / alone:.2f}, "
                  f"first/alone {ends[0] / alone:.2f}")


def report_pairs(pairs):
    """Two different kernels, the first issued first: does the second wait for the first?"""
    for (name_a, a), (name_b, b) in pairs:
        alone_a, alone_b = ends_on_streams([a])[0], ends_on_streams([b])[0]
        end_a, end_b = ends_on_streams([a, b])
        print(f"pair {name_a} then {name_b}: alone {alone_a:.3f} and {alone_b:.3f} | ends {end_a:.3f} and {end_b:.3f}")


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    sweep = "--sweep" in sys.argv[1:]
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    print("# case, k streams: ends of the k kernels after the common start (ms, sorted); "
          "fifo = one after another, shared = all at k x alone")
    if not sweep:
        report_same(basic_cases(), (2, 4, 8))
        return 0
    report_same(sweep_cases(), (2, 8))
    big, small, act = square(8192), batched(128), gelu(64)
    report_pairs([(big, small), (small, big), (big, act), (act, small), (small, act)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
