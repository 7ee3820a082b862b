#!/usr/bin/env python3
"""The MoE layer of bench/moe_layer_gpu.cc written plainly in PyTorch, for comparison on the same GPU.

MoE-GPT-XL (M 2048, H 8192), 4 experts on one GPU, 16,384 tokens, bf16, top-1, capacity factor 1.0,
gelu (erf), raw softmax scores, tokens beyond an expert's capacity dropped in token order: the
conventions of docs/runtime.md. Forward + backward timed with CUDA events after warm-up; prints
min / median / max in microseconds. Runs only where torch with CUDA is installed:

    python3 bench/moe_layer_torch.py [--tokens 16384] [--iters 20] [--warmup 5]
"""
import argparse
import sys


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed; nothing to compare", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch sees no GPU", file=sys.stderr)
        return 2
    dev, dt = "cuda", torch.bfloat16
    B, M, H, E = args.tokens, 2048, 8192, 4
    C = B // E  # floor(k f B / E) with k = 1, f = 1
    torch.manual_seed(1)
    x = torch.rand(B, M, device=dev, dtype=dt).mul_(2).sub_(1).requires_grad_()
    wg = torch.rand(M, E, device=dev, dtype=dt).mul_(2).sub_(1).requires_grad_()
    w1 = (torch.rand(E, M, H, device=dev, dtype=dt).mul_(2).sub_(1) / M ** 0.5).requires_grad_()
    w2 = (torch.rand(E, H, M, device=dev, dtype=dt).mul_(2).sub_(1) / H ** 0.5).requires_grad_()
    dy = torch.rand(B, M, device=dev, dtype=dt)

    def layer():
        probs = torch.softmax((x @ wg).float(), dim=-1)
        score, expert = probs.max(dim=-1)  # top-1; max returns the first (lowest) index on ties
        onehot = torch.nn.functional.one_hot(expert, E)
        slot = (torch.cumsum(onehot, dim=0) - 1).gather(1, expert[:, None]).squeeze(1)
        kept = slot < C
        row = expert * C + slot
        dispatched = torch.zeros(E * C, M, device=dev, dtype=dt)
        dispatched = dispatched.index_copy(0, row[kept], x[kept])
        h = torch.bmm(dispatched.view(E, C, M), w1)
        out = torch.bmm(torch.nn.functional.gelu(h), w2).view(E * C, M)
        y = torch.zeros(B, M, device=dev, dtype=dt)
        y = y.index_copy(0, kept.nonzero().squeeze(1), out[row[kept]] * score[kept, None].to(dt))
        y.backward(dy)

    times = []
    for i in range(args.warmup + args.iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        layer()
        end.record()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(start.elapsed_time(end) * 1e3)
        for t in (x, wg, w1, w2):
            t.grad = None
    times.sort()
    print(f"# moe_layer_torch: {torch.cuda.get_device_name()} torch {torch.__version__}")
    print(f"layer fwd+bwd (us): min {times[0]:.1f} median {times[len(times) // 2]:.1f} max {times[-1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
