#!/usr/bin/env python3
"""GPU check of the general kernel families (issue 5), independent of the C++ task code.

Reads the manifest written by `kernelrl data synth --emit-dir DIR` (variant name, source file,
task shapes, dims, params, tolerances), loads each compiled CUDA variant (DIR/so/<name>.so) with
ctypes, calls kernelrl_launch with PyTorch CUDA tensors on the current stream, and compares the
output with a PyTorch reference written here: |out - ref| <= atol + rtol * |ref| everywhere, on
outputs poisoned with NaN (or -7 for int64) before the call. Then times candidate and reference
(CUDA events, median of 20 after warm-up).
usage: check_general_families.py DIR/manifest.jsonl SO_DIR
"""
import ctypes
import json
import math
import os
import sys

import torch
import torch.nn.functional as F


class Args(ctypes.Structure):  # kernels/kernel_abi.h
    _fields_ = [("inputs", ctypes.c_void_p * 8), ("n_inputs", ctypes.c_int),
                ("outputs", ctypes.c_void_p * 4), ("n_outputs", ctypes.c_int),
                ("dims", ctypes.c_int64 * 8), ("n_dims", ctypes.c_int),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t)]


def layernorm(x, w, b, eps):
    mu = x.mean(1, keepdim=True)
    var = ((x - mu) ** 2).mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


REF = {
    "relu": lambda i, p, o: torch.relu(i[0]),
    "leaky_relu": lambda i, p, o: F.leaky_relu(i[0], p[0]),
    "gelu": lambda i, p, o: F.gelu(i[0]),
    "gelu_tanh": lambda i, p, o: F.gelu(i[0], approximate="tanh"),
    "sigmoid": lambda i, p, o: torch.sigmoid(i[0]),
    "tanh": lambda i, p, o: torch.tanh(i[0]),
    "silu": lambda i, p, o: F.silu(i[0]),
    "softplus": lambda i, p, o: F.softplus(i[0]),
    "elu": lambda i, p, o: F.elu(i[0], p[0]),
    "hardtanh": lambda i, p, o: F.hardtanh(i[0], p[0], p[1]),
    "hardsigmoid": lambda i, p, o: F.hardsigmoid(i[0]),
    "mish": lambda i, p, o: F.mish(i[0]),
    "selu": lambda i, p, o: F.selu(i[0]),
    "softsign": lambda i, p, o: F.softsign(i[0]),
    "scale_shift": lambda i, p, o: i[0] * p[0] + p[1],
    "add": lambda i, p, o: i[0] + i[1],
    "mul": lambda i, p, o: i[0] * i[1],
    "add_relu": lambda i, p, o: torch.relu(i[0] + i[1]),
    "maximum": lambda i, p, o: torch.maximum(i[0], i[1]),
    "sum_rows": lambda i, p, o: i[0].sum(1),
    "mean_rows": lambda i, p, o: i[0].mean(1),
    "max_rows": lambda i, p, o: i[0].amax(1),
    "min_rows": lambda i, p, o: i[0].amin(1),
    "argmax_rows": lambda i, p, o: i[0].argmax(1),
    "argmin_rows": lambda i, p, o: i[0].argmin(1),
    "l2norm_rows": lambda i, p, o: i[0].norm(dim=1),
    "cumsum_rows": lambda i, p, o: i[0].cumsum(1),
    "sum_cols": lambda i, p, o: i[0].sum(0),
    "sum_all": lambda i, p, o: i[0].sum().reshape(1),
    "softmax_rows": lambda i, p, o: torch.softmax(i[0], 1),
    "log_softmax_rows": lambda i, p, o: torch.log_softmax(i[0], 1),
    "softmax_scaled": lambda i, p, o: torch.softmax(i[0] * p[0], 1),
    "layernorm": lambda i, p, o: layernorm(i[0], i[1], i[2], p[0]),
    "add_layernorm": lambda i, p, o: layernorm(i[0] + i[1], i[2], i[3], p[0]),
    "rmsnorm": lambda i, p, o: i[0] * torch.rsqrt(i[0].pow(2).mean(1, keepdim=True) + p[0]) * i[1],
    "l2_normalize_rows": lambda i, p, o: F.normalize(i[0], dim=1, eps=p[0]),
    "transpose2d": lambda i, p, o: i[0].t().contiguous(),
    "transpose_021": lambda i, p, o: i[0].transpose(1, 2).contiguous(),
    "gather_rows": lambda i, p, o: i[0][i[1]],
    "scatter_add_rows": lambda i, p, o: torch.zeros(o[0], device=i[0].device).index_add_(0, i[1], i[0]),
    "take_along_rows": lambda i, p, o: i[0].gather(1, i[1][:, None])[:, 0],
    "matmul": lambda i, p, o: i[0] @ i[1],
    "matmul_bias_relu": lambda i, p, o: torch.relu(i[0] @ i[1] + i[2]),
    "matmul_bias_gelu": lambda i, p, o: F.gelu(i[0] @ i[1] + i[2]),
    "matmul_bias_sigmoid": lambda i, p, o: torch.sigmoid(i[0] @ i[1] + i[2]),
    "matvec": lambda i, p, o: i[0] @ i[1],
    "bmm": lambda i, p, o: torch.bmm(i[0], i[1]),
}


def index_bound(op, ins, outs):
    if op == "gather_rows":
        return ins[0]["shape"][0]
    if op == "scatter_add_rows":
        return outs[0]["shape"][0]
    return ins[0]["shape"][1]  # take_along_rows


def main():
    manifest, so_dir = sys.argv[1], sys.argv[2]
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = [json.loads(l) for l in open(manifest)]
    rows = [r for r in rows if r["backend"] == "cuda" and r["op"] != "hgemm"]
    passed = failed = 0
    families = {}
    print(f"{'variant':58s} {'check':6s} {'max_err':>10s} {'cand_us':>9s} {'torch_us':>9s} {'speedup':>8s}")
    for r in rows:
        t = r["task"]
        so = os.path.join(so_dir, r["name"] + ".so")
        if not os.path.exists(so):
            print(f"{r['name']:58s} NOSO (compile failed)")
            failed += 1
            families.setdefault(r["family"], [0, 0])[1] += 1
            continue
        fn = ctypes.CDLL(so).kernelrl_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(Args), ctypes.c_void_p]
        ins = []
        for x in t["inputs"]:
            if x["dtype"] == "i64":
                ins.append(torch.randint(0, index_bound(r["op"], t["inputs"], t["outputs"]), x["shape"], generator=gen).to(dev))
            else:
                ins.append(torch.randn(x["shape"], generator=gen).to(dev))
        p = t["params"]
        ref = REF[r["op"]](ins, p, [tuple(o["shape"]) for o in t["outputs"]]).contiguous()
        out = torch.empty(t["outputs"][0]["shape"], dtype=torch.int64 if t["outputs"][0]["dtype"] == "i64" else torch.float32, device=dev)
        out.fill_(-7 if out.dtype == torch.int64 else float("nan"))
        ws = torch.empty(32 << 20, dtype=torch.uint8, device=dev)
        a = Args()
        for k, x in enumerate(ins):
            a.inputs[k] = x.data_ptr()
        a.n_inputs = len(ins)
        a.outputs[0] = out.data_ptr()
        a.n_outputs = 1
        for k, d in enumerate(t["dims"]):
            a.dims[k] = d
        a.n_dims = len(t["dims"])
        a.workspace = ws.data_ptr()
        a.workspace_bytes = ws.numel()
        stream = torch.cuda.current_stream().cuda_stream
        rc = fn(ctypes.byref(a), ctypes.c_void_p(stream))
        torch.cuda.synchronize()
        o64, r64 = out.double(), ref.double()
        err = (o64 - r64).abs()
        ok = rc == 0 and bool(torch.isfinite(o64).all()) and bool((err <= t["atol"] + t["rtol"] * r64.abs()).all())
        max_err = float(err.max()) if torch.isfinite(o64).all() else math.inf

        def timeit(f):
            for _ in range(3):
                f()
            ts = []
            for _ in range(20):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                f()
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3)
            return sorted(ts)[len(ts) // 2]

        cand = timeit(lambda: fn(ctypes.byref(a), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
        tref = timeit(lambda: REF[r["op"]](ins, p, [tuple(o["shape"]) for o in t["outputs"]]))
        print(f"{r['name']:58s} {'ok' if ok else 'FAIL':6s} {max_err:10.3g} {cand:9.1f} {tref:9.1f} {tref / cand:7.2f}x"
              + ("" if ok else f"  rc={rc}"))
        sys.stdout.flush()
        fam = families.setdefault(r["family"], [0, 0])
        if ok:
            passed += 1
            fam[0] += 1
        else:
            failed += 1
            fam[1] += 1
    print(f"general CUDA variants: {passed} passed, {failed} failed")
    for f, (pa, fa) in sorted(families.items()):
        print(f"  {f:16s} {pa} passed, {fa} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
