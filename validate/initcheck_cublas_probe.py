#!/usr/bin/env python3
"""Does compute-sanitizer's initcheck see what cuBLAS writes on this GPU?

A cuBLAS GEMM (through CuPy) writes C; an element-wise kernel then reads every element of C. Run
under `compute-sanitizer --tool initcheck`: a report of uninitialised reads in the element-wise
kernel while the printed sums agree means the sanitizer did not track cuBLAS's stores (a false
positive), not that C was left unwritten. validate/gpu_session.sh (phase sanitize) runs it next to
the runtime's own initcheck, whose route kernel reads the gate GEMM's cuBLAS output.
"""
import sys


def main() -> int:
    try:
        import cupy as cp
    except ImportError:
        print("cupy is not installed; nothing to probe", file=sys.stderr)
        return 2
    rng = cp.random.default_rng(1)
    for dtype in (cp.float16, cp.float32):
        a = rng.random((128, 64), dtype=cp.float32).astype(dtype)
        b = rng.random((64, 8), dtype=cp.float32).astype(dtype)
        c = cp.matmul(a, b)  # written by cuBLAS
        doubled = cp.ElementwiseKernel("T x", "T y", "y = x + x", "double_it")(c)  # reads every element
        want = 2 * (a.astype(cp.float64) @ b.astype(cp.float64))
        err = float(cp.abs(doubled.astype(cp.float64) - want).max() / cp.abs(want).max())
        print(f"{cp.dtype(dtype).name}: max relative error of 2 * (A @ B) {err:.2e} (written: {err < 1e-2})")
    cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
