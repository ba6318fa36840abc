#!/usr/bin/env python3
"""Independent reference for the C++ policy: Hugging Face transformers' LlamaForCausalLM,
Qwen2ForCausalLM and Qwen3ForCausalLM.

  hf_parity.py probe
      exit 0 if torch, transformers and safetensors import (tests skip otherwise).
  hf_parity.py make DIR [--device cpu|cuda] [--dtype float32|bfloat16]
      saves tiny random models (GQA 4/2, every weight perturbed, norms and biases included) with
      save_pretrained, one per variant (VARIANTS below): DIR/tied (Llama, one model.safetensors,
      tied embeddings), DIR/sharded (Llama, untied, 100 KB shards + index), DIR/llama3 (rope_type
      llama3 with its three frequency bands inside head_dim 16), DIR/qwen2_tied and DIR/qwen2
      (q/k/v biases), DIR/qwen3 (q/k norms, head_dim 32 != hidden/heads) and DIR/qwen3_bias
      (attention_bias: q/k/v/o biases); each gets reference.safetensors holding `tokens`
      [2, 40] int64 and the `logits` [2, 40, V] fp32 of the saved model loaded back by
      from_pretrained (RoPE frequencies in fp32, computed on the CPU, as for any checkpoint).
  hf_parity.py check DIR... [--device ...] [--dtype ...] [--atol A] [--rtol R]
      loads each DIR (written by the C++ export) with AutoModelForCausalLM.from_pretrained, runs
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


COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              rms_norm_eps=1e-6)
# Llama 3.1's rope scaling with original_max_position_embeddings 64: with head_dim 16 and
# theta 10000 the wavelengths 2*pi*10000^(i/8) fall in all three bands (< 16, 16..64, > 64).
LLAMA3_ROPE = dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                   high_freq_factor=4.0, original_max_position_embeddings=64)
# name: (model_type, tied, shard_kb, extra config)
VARIANTS = {
    "tied": ("llama", 1, 0, dict(rope_parameters=dict(rope_type="default", rope_theta=5000.0))),
    "sharded": ("llama", 0, 100, dict(rope_parameters=dict(rope_type="default",
                                                          rope_theta=5000.0))),
    "llama3": ("llama", 0, 0, dict(rope_parameters=LLAMA3_ROPE)),
    "qwen2_tied": ("qwen2", 1, 0, dict(rope_parameters=dict(rope_type="default",
                                                           rope_theta=1e6))),
    "qwen2": ("qwen2", 0, 0, dict()),
    "qwen3": ("qwen3", 1, 0, dict(head_dim=32)),
    "qwen3_bias": ("qwen3", 0, 0, dict(head_dim=16, attention_bias=True)),
}
SEQ_LEN = 40


def config_of(model_type, tied, extra):
    from transformers import AutoConfig
    return AutoConfig.for_model(model_type, tie_word_embeddings=bool(tied), **COMMON, **extra)


def make(args):
    rc = 0
    for name, (model_type, tied, shard_kb, extra) in VARIANTS.items():
        rc |= make_one(f"{args.dir[0]}/{name}", config_of(model_type, tied, extra), shard_kb, args)
    return rc


def make_one(out, config, shard_kb, args):
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM
    torch.manual_seed(1234)
    config._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # norms leave 1.0, biases 0, weights get structure
    dtype = getattr(torch, args.dtype)
    model = model.to(device=args.device, dtype=dtype).eval()
    kw = {"max_shard_size": f"{shard_kb}KB"} if shard_kb > 0 else {}
    model.save_pretrained(out, safe_serialization=True, **kw)
    # The reference is the saved model loaded back, as a user loads a checkpoint: `.to(dtype)`
    # above also rounded the RoPE inverse frequencies (a float buffer) to bf16, which
    # from_pretrained recomputes in fp32 (on the CPU); the rounded ones moved bf16 logits by ~1e-2.
    model = AutoModelForCausalLM.from_pretrained(out, dtype=dtype).to(args.device).eval()
    tokens = torch.randint(0, 97, (2, SEQ_LEN), generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = model(tokens.to(args.device)).logits.float().cpu()
    save_file({"tokens": tokens.contiguous(), "logits": logits.contiguous()},
              f"{out}/reference.safetensors")
    print(f"made {out}: {config.model_type} tied={config.tie_word_embeddings} "
          f"shard_kb={shard_kb} dtype={args.dtype}")
    return 0


def check(args):
    rc = 0
    for d in args.dir:
        rc |= check_one(d, args)
    return rc


def check_one(d, args):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    dtype = getattr(torch, args.dtype)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=dtype).to(args.device).eval()
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
