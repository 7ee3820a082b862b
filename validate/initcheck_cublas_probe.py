#!/usr/bin/env python3
"""Does compute-sanitizer's initcheck see what cuBLAS writes on this GPU?

On an H200, initcheck reported reads of unwritten memory in every bf16 layer test of the runtime
and in none of the fp32 ones; every reported buffer was the output of a bf16 cuBLAS GEMM, and the
numerics matched the CPU reference. This probe makes the runtime's own cuBLAS call
(cublasGemmStridedBatchedEx through ctypes, with the runtime's handle settings: fp32 accumulation,
reduced-precision reduction disallowed, a workspace of its own), on the shapes of the layer test's
gate, into a freshly allocated C, then reads C twice: with an element-wise kernel and with a copy
to the host (cudaMemcpy). Run one case per process under initcheck:

    compute-sanitizer --tool initcheck --print-limit 1 --show-backtrace no python3 \\
        validate/initcheck_cublas_probe.py CASE

A case whose printed error is small (C was written correctly) while initcheck reports
uninitialised reads means the sanitizer did not see cuBLAS's stores: a false positive. The case
`...-prezeroed` clears C with cudaMemset first, so the same stores land on memory initcheck already
counts as written. `list` prints the case names; validate/gpu_session.sh (phase sanitize) runs
every case.
"""
import ctypes
import sys

# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h).
R_32F, R_16F, R_16BF = 0, 2, 14
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
DISALLOW_REDUCED_PRECISION_REDUCTION = 16
OP_N, OP_T = 0, 1
GEMM_DEFAULT = -1
WORKSPACE_BYTES = 32 << 20

# name: (A/B type, C type, compute, trans_a, m, n, k, batch, zero C first)
# The layer test's gate: tokens 128, d_model 64, 8 experts; forward logits = X W (128 x 8, k 64),
# weight gradient = X^T dLogits (64 x 8, k 128); the expert GEMMs batch 4 local experts. (A 4096 x
# 4096 bf16 case ran past 40 s under initcheck on an H200, printing reports of all of its C.)
CASES = {
    "fp32-tf32-gate": (R_32F, R_32F, COMPUTE_32F_FAST_TF32, False, 128, 8, 64, 1, False),
    "bf16-gate": (R_16BF, R_16BF, COMPUTE_32F, False, 128, 8, 64, 1, False),
    "bf16-gate-wgrad": (R_16BF, R_16BF, COMPUTE_32F, True, 64, 8, 128, 1, False),
    "bf16-gate-wgrad-prezeroed": (R_16BF, R_16BF, COMPUTE_32F, True, 64, 8, 128, 1, True),
    "bf16-in-fp32-out-gate": (R_16BF, R_32F, COMPUTE_32F, False, 128, 8, 64, 1, False),
    "fp16-gate-wgrad": (R_16F, R_16F, COMPUTE_32F, True, 64, 8, 128, 1, False),
    "bf16-experts-batched": (R_16BF, R_16BF, COMPUTE_32F, False, 64, 96, 64, 4, False),
}


def to_device(cp, np, host, dtype):
    """host (float32) as a device array of dtype's bits: bf16 by round-to-nearest-even."""
    if dtype == R_32F:
        return cp.asarray(host.astype(np.float32))
    if dtype == R_16F:
        return cp.asarray(host.astype(np.float16)).view(cp.uint16)
    bits = host.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return cp.asarray(rounded.astype(np.uint16))


def from_host_bits(np, host, dtype):
    """What to_device stored, back as float64 (the inputs the GEMM really saw)."""
    if dtype == R_32F:
        return host.astype(np.float64)
    if dtype == R_16F:
        return host.view(np.float16).astype(np.float64)
    return (host.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def run_case(name):
    import cupy as cp
    import numpy as np

    ab, ct, compute, trans_a, m, n, k, batch, prezero = CASES[name]
    lib = ctypes.CDLL("libcublas.so.13")
    handle = ctypes.c_void_p()
    assert lib.cublasCreate_v2(ctypes.byref(handle)) == 0
    assert lib.cublasSetMathMode(handle, DISALLOW_REDUCED_PRECISION_REDUCTION) == 0
    stream = cp.cuda.Stream(non_blocking=True)
    assert lib.cublasSetStream_v2(handle, ctypes.c_void_p(stream.ptr)) == 0
    workspace = cp.cuda.alloc(WORKSPACE_BYTES)  # uninitialised, as the runtime's
    assert lib.cublasSetWorkspace_v2(handle, ctypes.c_void_p(workspace.ptr), ctypes.c_size_t(WORKSPACE_BYTES)) == 0

    rng = np.random.default_rng(1)
    a_rows, a_cols = (k, m) if trans_a else (m, k)  # row-major A as stored
    a_host = rng.standard_normal((batch, a_rows, a_cols), dtype=np.float32)
    b_host = rng.standard_normal((batch, k, n), dtype=np.float32)
    a, b = to_device(cp, np, a_host, ab), to_device(cp, np, b_host, ab)
    c_elem = 4 if ct == R_32F else 2
    c_mem = cp.cuda.alloc(batch * m * n * c_elem)  # never written before the GEMM
    if prezero:
        cp.cuda.runtime.memset(c_mem.ptr, 0, batch * m * n * c_elem)
    cp.cuda.runtime.deviceSynchronize()  # uploads and memset (default stream) before the GEMM's stream
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    # Row-major C = op(A) B is column-major C^T = B^T op(A)^T: B first, m and n swapped (as the runtime).
    status = lib.cublasGemmStridedBatchedEx(
        handle, OP_N, OP_T if trans_a else OP_N, n, m, k, ctypes.byref(alpha),
        ctypes.c_void_p(b.data.ptr), ab, n, ctypes.c_longlong(k * n),
        ctypes.c_void_p(a.data.ptr), ab, a_cols, ctypes.c_longlong(a_rows * a_cols),
        ctypes.byref(beta), ctypes.c_void_p(c_mem.ptr), ct, n, ctypes.c_longlong(m * n),
        batch, compute, GEMM_DEFAULT)
    assert status == 0, f"cublasGemmStridedBatchedEx returned {status}"
    stream.synchronize()

    c_dtype = cp.float32 if ct == R_32F else cp.uint16
    c = cp.ndarray((batch, m, n), dtype=c_dtype, memptr=c_mem)
    copied = cp.ElementwiseKernel("T x", "T y", "y = x", "read_c")(c)  # a kernel reads every element
    host = cp.asnumpy(c)  # cudaMemcpy reads every element
    got = from_host_bits(np, host, ct)
    a_used = from_host_bits(np, cp.asnumpy(a), ab)
    b_used = from_host_bits(np, cp.asnumpy(b), ab)
    want = np.matmul(np.swapaxes(a_used, 1, 2) if trans_a else a_used, b_used)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    same = bool((cp.asnumpy(copied) == host).all())
    print(f"{name}: C {batch}x{m}x{n} (k {k}) max relative error {err:.2e}, "
          f"written: {err < 2e-2}, kernel copy equal: {same}")
    lib.cublasDestroy_v2(handle)
    return 0 if err < 2e-2 and same else 1


def main(argv):
    if len(argv) != 2 or (argv[1] != "list" and argv[1] not in CASES):
        print(f"usage: {argv[0]} list | CASE  (cases: {', '.join(CASES)})", file=sys.stderr)
        return 2
    if argv[1] == "list":
        print("\n".join(CASES))
        return 0
    try:
        import cupy  # noqa: F401
    except ImportError:
        print("cupy is not installed; nothing to probe", file=sys.stderr)
        return 2
    return run_case(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
