"""The expert shape flags and the SwiGLU activation that the small-expert PyTorch probes share
(small_expert_probe.py, host_launch_probe.py). Defaults: one expert-parallel rank's share of
Qwen3-30B-A3B's experts (hidden 2,048, d_ffn 768, 16 local experts, 2,048 rows each)."""
import argparse

import torch


def expert_shape_args():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--rows", type=int, default=2048)
    return p.parse_args()


def swiglu(h):
    gate, up = h.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up
