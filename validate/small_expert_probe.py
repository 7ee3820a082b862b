#!/usr/bin/env python3
"""How much of a fine-grained MoE layer's time is the host's?

The simulator is 1.4-2.7x too fast on the published steps of small-expert MoE models
(Qwen3-30B-A3B, gpt-oss: docs/validation.md), and it prices no host time per kernel. This probe
runs one expert-parallel rank's share of a Qwen3-30B-A3B MoE MLP on one GPU (hidden 2,048, expert
d_ffn 768 with SwiGLU, 16 local experts of 128, 4,096 tokens x top-8 = 32,768 routed rows, 2,048
per expert), forward and backward in bf16, two ways: a loop over the experts (Megatron's
SequentialMLP: three GEMMs and the activation per expert and pass) and one batched GEMM per
projection (grouped). Each is timed issued eagerly from Python and replayed from a CUDA graph (the
GPU's time alone); CUDA events, medians of 10 runs. Run it on a GPU:

    python3 validate/small_expert_probe.py [--hidden 2048 --ffn 768 --experts 16 --rows 2048]
"""
import statistics
import sys

import torch

from moe_probe_shapes import expert_shape_args, swiglu



def median_ms(run, reps=10):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps + 2):  # two warm up
        torch.cuda.synchronize()
        start.record()
        run()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times[2:])


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    a = expert_shape_args()
    HIDDEN, FFN, EXPERTS, ROWS = a.hidden, a.ffn, a.experts, a.rows  # noqa: N806
    dt = torch.bfloat16
    torch.manual_seed(1)
    x = torch.randn(EXPERTS, ROWS, HIDDEN, device="cuda", dtype=dt, requires_grad=True)
    w1 = (torch.randn(EXPERTS, HIDDEN, 2 * FFN, device="cuda", dtype=dt) / HIDDEN ** 0.5).requires_grad_()
    w2 = (torch.randn(EXPERTS, FFN, HIDDEN, device="cuda", dtype=dt) / FFN ** 0.5).requires_grad_()
    dy = torch.randn(EXPERTS, ROWS, HIDDEN, device="cuda", dtype=dt)

    # The loop's experts are tensors of their own, as SequentialMLP's are (indexing one stacked
    # tensor would add a whole-tensor gradient per expert to the backward).
    xs = [x[e].detach().clone().requires_grad_() for e in range(EXPERTS)]
    w1s = [w1[e].detach().clone().requires_grad_() for e in range(EXPERTS)]
    w2s = [w2[e].detach().clone().requires_grad_() for e in range(EXPERTS)]

    def looped():
        for e in range(EXPERTS):
            (swiglu(xs[e] @ w1s[e]) @ w2s[e]).backward(dy[e])

    def batched():
        torch.bmm(swiglu(torch.bmm(x, w1)), w2).backward(dy)

    flops = 3 * 2 * EXPERTS * ROWS * HIDDEN * (2 * FFN + FFN)  # forward and two backward GEMMs each
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}; {EXPERTS} experts x {ROWS} rows, "
          f"hidden {HIDDEN}, d_ffn {FFN} (SwiGLU), bf16, forward + backward, {flops / 1e9:.0f} GFLOP of GEMMs")
    print("# way: ms eager | ms replayed from a CUDA graph | eager / graph")
    for name, step in (("loop over experts", looped), ("batched GEMMs", batched)):
        eager = median_ms(step)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()  # warm the autograd and cuBLAS state on the capturing stream
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        replay = median_ms(graph.replay)
        print(f"{name}: {eager:.3f} | {replay:.3f} | {eager / replay:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
