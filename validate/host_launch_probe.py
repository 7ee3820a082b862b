#!/usr/bin/env python3
"""How long does PyTorch's host take to launch one kernel of a training step?

`moesim simulate --host-launch-us X` prices X microseconds of host time per launched task and has
no default: docs/validation.md ("Host launches and the small-expert steps") found that the
small-expert MoE steps it replays come within 10-25% only at 60-80 us a task, and no measurement
says what a launch costs. This probe measures it for three workloads on one GPU, each forward and
backward under autograd with a single backward() per iteration, as a training step runs them:

  add        a chain of 64 in-place adds on a small tensor (no autograd): the bare per-op cost;
  mlp        a dense SwiGLU MLP block (layer norm, fc1, SwiGLU, fc2, residual), hidden 2,048;
  experts    one expert-parallel rank's share of a fine-grained MoE layer as a loop over its
             experts (Megatron-Core's SequentialMLP; default Qwen3-30B-A3B's: 16 experts of d_ffn
             768 at 2,048 rows each);
  batched    the same experts as one batched GEMM per projection.

For each: the CUDA kernels one iteration launches (counted once with torch.profiler), the host's
time to issue an iteration (wall time of the Python loop, the GPU left to drain after), the GPU's
time for it replayed from a CUDA graph, and the host's microseconds per kernel. Run it on a GPU:

    python3 validate/host_launch_probe.py [--hidden 2048 --ffn 768 --experts 16 --rows 2048]
"""
import statistics
import sys
import time

import torch

from moe_probe_shapes import expert_shape_args, swiglu


def kernels_per_iteration(step):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def host_profile(step, rows=12):
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def host_us(step, reps=10, gpu_busy=False):
    """Median host time to issue one iteration; the GPU drains between iterations. With gpu_busy,
    a sleep kernel of about 50 ms is queued first, so that the iteration's launches wait behind it:
    the host then cannot be held up by the GPU, and a time near the idle one shows it was not."""
    times = []
    for _ in range(reps + 2):  # two warm up
        torch.cuda.synchronize()
        if gpu_busy:
            torch.cuda._sleep(100_000_000)  # clock cycles: 50 ms at 2 GHz
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times[2:])


def graph_us(step, reps=10):
    """Median GPU time of one iteration replayed from a CUDA graph (no host launches)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()  # warm autograd's and cuBLAS's state on the capturing stream
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps + 2):
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times[2:])


def workloads(a):
    dt = torch.bfloat16
    small = torch.zeros(1024, device="cuda")

    def add():
        for _ in range(64):
            small.add_(1.0)

    x = torch.randn(a.rows, a.hidden, device="cuda", dtype=dt, requires_grad=True)
    norm = torch.nn.LayerNorm(a.hidden, device="cuda", dtype=dt)
    fc1 = torch.nn.Linear(a.hidden, 2 * 4 * a.hidden, bias=False, device="cuda", dtype=dt)
    fc2 = torch.nn.Linear(4 * a.hidden, a.hidden, bias=False, device="cuda", dtype=dt)
    dy = torch.randn(a.rows, a.hidden, device="cuda", dtype=dt)

    def mlp():
        (x + fc2(swiglu(fc1(norm(x))))).backward(dy)

    # As Megatron-Core's SequentialMLP: one permuted input split into the experts' rows, a loop over
    # the experts (each its own weights), the outputs concatenated; the split's backward is one
    # concatenation, not a whole-tensor gradient per expert.
    xe = torch.randn(a.experts * a.rows, a.hidden, device="cuda", dtype=dt, requires_grad=True)
    w1 = [(torch.randn(a.hidden, 2 * a.ffn, device="cuda", dtype=dt) / a.hidden ** 0.5).requires_grad_()
          for _ in range(a.experts)]
    w2 = [(torch.randn(a.ffn, a.hidden, device="cuda", dtype=dt) / a.ffn ** 0.5).requires_grad_()
          for _ in range(a.experts)]
    dye = torch.randn(a.experts * a.rows, a.hidden, device="cuda", dtype=dt)

    def experts():
        parts = torch.split(xe, a.rows)
        torch.cat([swiglu(parts[e] @ w1[e]) @ w2[e] for e in range(a.experts)]).backward(dye)

    # The same experts as one batched GEMM per projection (a grouped GEMM of equal groups).
    w1b = torch.stack([w.detach() for w in w1]).requires_grad_()
    w2b = torch.stack([w.detach() for w in w2]).requires_grad_()

    def batched():
        xb = xe.view(a.experts, a.rows, a.hidden)
        torch.bmm(swiglu(torch.bmm(xb, w1b)), w2b).view(-1, a.hidden).backward(dye)

    return (("add", add), ("mlp", mlp), ("experts", experts), ("batched", batched))


def main():
    if not torch.cuda.is_available():
        print("no GPU", file=sys.stderr)
        return 1
    a = expert_shape_args()
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}; hidden {a.hidden}, {a.experts} experts of "
          f"d_ffn {a.ffn} x {a.rows} rows, bf16, forward + one backward")
    print("# workload: kernels | host us per iteration (GPU idle at the start / GPU busy) | GPU us (CUDA graph) | "
          "host us per kernel (idle / busy)")
    for name, step in workloads(a):
        step()  # first call: cuBLAS handles, autograd state
        kernels = kernels_per_iteration(step)
        host = host_us(step)
        busy = host_us(step, gpu_busy=True)
        gpu = graph_us(step)
        n = max(kernels, 1)
        print(f"{name}: {kernels} | {host:.1f} / {busy:.1f} | {gpu:.1f} | {host / n:.2f} / {busy / n:.2f}")
    for name, step in workloads(a)[1:3]:
        print(f"\n# {name}: where the host's time goes (torch.profiler, CPU; the profiler adds its own cost)")
        print(host_profile(step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
