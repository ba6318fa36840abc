#!/usr/bin/env python3
"""Independent reference for the C++ Llama: Hugging Face transformers' LlamaForCausalLM.

  hf_parity.py probe
      exit 0 if torch, transformers and safetensors import (tests skip otherwise).
  hf_parity.py make DIR [--device cpu|cuda] [--dtype float32|bfloat16]
      saves two tiny random LlamaForCausalLM (GQA 4/2, rope_theta 5000, every weight perturbed,
      norms included) with save_pretrained: DIR/tied (one model.safetensors, tied embeddings)
      and DIR/sharded (untied, 100 KB shards + model.safetensors.index.json); each gets
      reference.safetensors holding `tokens` [2, 12] int64 and HF's `logits` [2, 12, V] fp32.
  hf_parity.py check DIR... [--device ...] [--dtype ...] [--atol A] [--rtol R]
      loads each DIR (written by the C++ export) with LlamaForCausalLM.from_pretrained, runs
      DIR/cpp_reference.safetensors' `tokens`, compares with its `logits` (the C++ model's);
      prints `max_abs_diff=...` per DIR and exits 1 if any max|Δ| > atol + rtol * max|logits|.
"""
import argparse
import sys


def probe():
    import safetensors  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    return 0


def tiny_config(tied):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                       rope_theta=5000.0, rms_norm_eps=1e-6, tie_word_embeddings=bool(tied),
                       attn_implementation="sdpa")


def make(args):
    rc = 0
    for name, tied, shard_kb in (("tied", 1, 0), ("sharded", 0, 100)):
        rc |= make_one(f"{args.dir[0]}/{name}", tied, shard_kb, args)
    return rc


def make_one(out, tied, shard_kb, args):
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM
    torch.manual_seed(1234)
    model = LlamaForCausalLM(tiny_config(tied))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # norms leave 1.0, weights get structure
    dtype = getattr(torch, args.dtype)
    model = model.to(device=args.device, dtype=dtype).eval()
    kw = {"max_shard_size": f"{shard_kb}KB"} if shard_kb > 0 else {}
    model.save_pretrained(out, safe_serialization=True, **kw)
    tokens = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = model(tokens.to(args.device)).logits.float().cpu()
    save_file({"tokens": tokens.contiguous(), "logits": logits.contiguous()},
              f"{out}/reference.safetensors")
    print(f"made {out}: tied={tied} shard_kb={shard_kb} dtype={args.dtype}")
    return 0


def check(args):
    rc = 0
    for d in args.dir:
        rc |= check_one(d, args)
    return rc


def check_one(d, args):
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM
    dtype = getattr(torch, args.dtype)
    model = LlamaForCausalLM.from_pretrained(d, dtype=dtype).to(args.device).eval()
    ref = load_file(f"{d}/cpp_reference.safetensors")
    with torch.no_grad():
        logits = model(ref["tokens"].to(args.device)).logits.float().cpu()
    want = ref["logits"].float()
    if logits.shape != want.shape:
        print(f"shape mismatch: hf {tuple(logits.shape)} cpp {tuple(want.shape)}")
        return 1
    diff = (logits - want).abs().max().item()
    bound = args.atol + args.rtol * want.abs().max().item()
    print(f"{d}: max_abs_diff={diff:.3e} bound={bound:.3e} max_logit={want.abs().max().item():.3f}")
    return 0 if diff <= bound else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["probe", "make", "check"])
    ap.add_argument("dir", nargs="*")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=0.0)
    args = ap.parse_args()
    try:
        if args.mode == "probe":
            return probe()
    except ImportError as e:
        print(f"missing: {e}")
        return 3
    return make(args) if args.mode == "make" else check(args)


if __name__ == "__main__":
    sys.exit(main())
