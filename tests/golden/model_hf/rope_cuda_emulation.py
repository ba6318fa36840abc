#!/usr/bin/env python3
"""How much RoPE tables change when transformers computes the inverse frequencies on a GPU (a
model built by from_config under torch.device("cuda")) rather than on the CPU (from_pretrained,
and KernelRL): the measurement behind docs/benchmarks.md's 2026-11-26 parity section, on a host
with no GPU.

  rope_cuda_emulation.py [--end-to-end]

On a GPU, torch's pow is CUDA's powf (libdevice __nv_powf), and `tensor / python_scalar` is
`tensor * (1 / scalar)` (BinaryDivTrueKernel.cu). powf is emulated here: __nv_powf's LLVM IR, taken
from the CUDA toolkit's libdevice and compiled for this CPU with clang. The nvvm intrinsics become
IEEE fma/add/mul/fabs/floor/rint/trunc. The one `rcp.approx.ftz.f32` becomes a correctly rounded
reciprocal, and the script checks that moving it by ±1 ulp changes no result. Needs clang,
llvm-dis and the CUDA toolkit (CUDA_HOME, default /usr/local/cuda). Prints, per configuration, the
frequencies that differ and how many bf16 cos/sin values differ at positions < 256 and < 4096.
--end-to-end also runs transformers' own bf16 Llama-3 model (d 1024, heads 8/2, 32 layers) with
both sets of frequencies and prints the logit gap (about a minute on 2 cores).
"""
import argparse
import ctypes
import math
import os
import re
import subprocess
import tempfile

import numpy as np
import torch

# nvvm intrinsic -> LLVM generic (the libdevice build without flush-to-zero: __nvvm_reflect = 0).
INTRINSICS = {
    "fma.rn": "@llvm.fma.f32(", "add.rn": "@kr_add(", "mul.rn": "@kr_mul(",
    "fabs": "@llvm.fabs.f32(", "floor": "@llvm.floor.f32(", "round": "@llvm.rint.f32(",
    "trunc": "@llvm.trunc.f32(",
}
HEADER = """target triple = "x86_64-pc-linux-gnu"
%struct.float2 = type { float, float }
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.fabs.f32(float)
declare float @llvm.floor.f32(float)
declare float @llvm.rint.f32(float)
declare float @llvm.trunc.f32(float)
declare float @kr_rcp(float)
define float @kr_add(float %a, float %b) {
  %r = fadd float %a, %b
  ret float %r
}
define float @kr_mul(float %a, float %b) {
  %r = fmul float %a, %b
  ret float %r
}
"""
RCP_C = """#include <math.h>
int kr_rcp_ulps = 0;
float kr_rcp(float x) {
  float r = 1.0f / x;
  if (kr_rcp_ulps) r = nextafterf(r, kr_rcp_ulps > 0 ? INFINITY : -INFINITY);
  return r;
}
"""


def build_powf(work):
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    ll = os.path.join(work, "libdevice.ll")
    subprocess.run(["llvm-dis", os.path.join(cuda, "nvvm/libdevice/libdevice.10.bc"), "-o", ll],
                   check=True)
    text = open(ll).read()
    start = text.index("define float @__nv_powf(float %a, float %b)")
    body = text[start:text.index("\n}\n", start) + 3]
    body = body.replace("@__nv_powf(float %a, float %b) #0", "@kr_powf(float %a, float %b)")
    body = re.sub(r"call i32 @__nvvm_reflect\(.*?\) #\d+", "add i32 0, 0", body)
    for name, generic in INTRINSICS.items():
        body = re.sub(r"@llvm\.nvvm\." + re.escape(name) + r"(\.ftz)?\.f\(", generic, body)
    body = re.sub(r'call float asm "rcp\.approx\.ftz\.f32 \$0,\$1;", "=f,f"\(float (%[\w.]+)\)',
                  r"call float @kr_rcp(float \1)", body)
    body = re.sub(r" #\d+", "", re.sub(r", !srcloc !\d+", "", body))
    assert "nvvm" not in body and "asm" not in body, "unmapped libdevice construct in __nv_powf"
    open(os.path.join(work, "powf.ll"), "w").write(HEADER + body)
    open(os.path.join(work, "rcp.c"), "w").write(RCP_C)
    so = os.path.join(work, "libkrpowf.so")
    subprocess.run(["clang", "-O1", "-fPIC", "-shared", os.path.join(work, "powf.ll"),
                    os.path.join(work, "rcp.c"), "-o", so, "-lm"], check=True)
    lib = ctypes.CDLL(so)
    lib.kr_powf.restype = ctypes.c_float
    lib.kr_powf.argtypes = [ctypes.c_float, ctypes.c_float]
    return lib


def inv_freq(theta, dim, llama3, gpu_pow=None):
    """transformers' default / llama3 rope function in fp32; with gpu_pow, as CUDA rounds it."""
    exponent = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    if gpu_pow is None:
        inv = 1.0 / (theta ** exponent)
        div = lambda t, b: t / b  # noqa: E731
    else:
        inv = 1.0 / torch.tensor([gpu_pow(theta, x) for x in exponent.tolist()])
        div = lambda t, b: t * torch.tensor(1.0 / b, dtype=torch.float32)  # noqa: E731
    if llama3 is None:
        return inv
    factor, low, high, old = llama3
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / low, div(inv, factor), inv)
    s = div(old / wavelen - low, high - low)
    smoothed = div((1 - s) * scaled, factor) + s * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def end_to_end(cpu_inv, gpu_inv):
    from transformers import AutoConfig, AutoModelForCausalLM
    rope = dict(rope_type="llama3", rope_theta=5e5, factor=8.0, low_freq_factor=1.0,
                high_freq_factor=4.0, original_max_position_embeddings=8192)
    cfg = AutoConfig.for_model("llama", vocab_size=32000, hidden_size=1024, intermediate_size=3584,
                               num_hidden_layers=32, num_attention_heads=8, num_key_value_heads=2,
                               max_position_embeddings=131072, rope_parameters=rope,
                               rms_norm_eps=1e-5, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    rotary = model.model.rotary_emb
    assert torch.equal(rotary.inv_freq, cpu_inv)
    tokens = torch.randint(0, 32000, (4, 256), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a = model(tokens).logits.float()
        rotary.inv_freq.copy_(gpu_inv)
        b = model(tokens).logits.float()
    la, lb = a.log_softmax(-1), b.log_softmax(-1)
    print(f"end to end (32 layers, bf16, 4x256 tokens): max |dlogit| {(a - b).abs().max():.3g}, "
          f"max |logit| {a.abs().max():.3g}, argmax agree "
          f"{100 * (a.argmax(-1) == b.argmax(-1)).float().mean():.2f} %, "
          f"KL {(la.exp() * (la - lb)).sum(-1).mean():.2g}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--end-to-end", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        lib = build_powf(work)
        ulps = ctypes.c_int.in_dll(lib, "kr_rcp_ulps")

        def gpu_pow(base, x):
            return lib.kr_powf(np.float32(base), np.float32(x))

        results = {}
        for name, theta, llama3 in [("qwen2.5 theta 1e6", 1e6, None),
                                    ("llama-3.1 theta 5e5 llama3", 5e5, (8.0, 1.0, 4.0, 8192))]:
            cpu = inv_freq(theta, 128, llama3)
            gpu = {}
            for u in (0, 1, -1):
                ulps.value = u
                gpu[u] = inv_freq(theta, 128, llama3, gpu_pow)
            ulps.value = 0
            assert torch.equal(gpu[1], gpu[0]) and torch.equal(gpu[-1], gpu[0]), \
                "the emulation depends on rcp.approx's rounding"
            results[name] = (cpu, gpu[0])
            counts = []
            for positions in (256, 4096):
                angle = torch.arange(positions).float()[:, None] * cpu
                angle_gpu = torch.arange(positions).float()[:, None] * gpu[0]
                counts.append(sum(int((f(angle).bfloat16() != f(angle_gpu).bfloat16()).sum())
                                  for f in (torch.cos, torch.sin)))
            print(f"{name}: inv_freq differs at {(cpu != gpu[0]).nonzero().flatten().tolist()}; "
                  f"bf16 cos/sin differing: {counts[0]} at positions < 256, "
                  f"{counts[1]} at < 4096")
        if args.end_to_end:
            end_to_end(*results["llama-3.1 theta 5e5 llama3"])


if __name__ == "__main__":
    main()
