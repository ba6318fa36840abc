#!/usr/bin/env python3
"""HF side of bench/gpu_hf_policy.sh: a random-weight model of a real checkpoint's shape made by
transformers, its reference logits, and `generate`'s throughput (bench_hf_policy.cpp is the
KernelRL side).

  hf_policy_ref.py SHAPE OUT [--device cuda] [--batch 64 --prompt 512 --new 512] [--no-generate]
SHAPE: qwen2-1.5b (Qwen2.5-1.5B: d 1536, 28 layers, heads 12/2, ff 8960, vocab 151936, tied,
q/k/v biases), llama3-8b (Llama-3.1-8B: d 4096, 32 layers, heads 32/8, ff 14336, vocab
128256, rope llama3 factor 8, theta 500000), or tiny-qwen2 / tiny-llama3 (CPU smoke tests).
Writes OUT/model (save_pretrained, bf16 on CUDA), OUT/ref.safetensors (`tokens` [4, 256] and
the logits, in the model dtype as fp32, of OUT/model loaded back by from_pretrained, as a user
loads a checkpoint) and OUT/hf.json: {"shape", "params",
"generate": {"batch", "prompt", "new", "seconds", "tokens_per_s"}} where generate ran with a
static cache (cache_implementation="static"), warmed by a first call with the same arguments
in the same process (its decode step compiled for these shapes), sampling at temperature 1 with min_new_tokens = max_new_tokens so every row
decodes the full budget; tokens_per_s = batch * new / wall seconds (prefill included).
"""
import argparse
import json
import os
import time

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

SHAPES = {
    "qwen2-1.5b": ("qwen2", dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960,
                                 num_hidden_layers=28, num_attention_heads=12,
                                 num_key_value_heads=2, max_position_embeddings=32768,
                                 rope_parameters=dict(rope_type="default", rope_theta=1e6),
                                 rms_norm_eps=1e-6, tie_word_embeddings=True)),
    "llama3-8b": ("llama", dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                                num_hidden_layers=32, num_attention_heads=32,
                                num_key_value_heads=8, max_position_embeddings=131072,
                                rope_parameters=dict(rope_type="llama3", rope_theta=5e5,
                                                     factor=8.0, low_freq_factor=1.0,
                                                     high_freq_factor=4.0,
                                                     original_max_position_embeddings=8192),
                                rms_norm_eps=1e-5, tie_word_embeddings=False)),
    "tiny-qwen2": ("qwen2", dict(vocab_size=512, hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, max_position_embeddings=2048,
                                 tie_word_embeddings=True)),
    "tiny-llama3": ("llama", dict(vocab_size=512, hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=4096,
                                  rope_parameters=dict(rope_type="llama3", rope_theta=5e5,
                                                       factor=8.0, low_freq_factor=1.0,
                                                       high_freq_factor=4.0,
                                                       original_max_position_embeddings=64))),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=512)
    ap.add_argument("--no-generate", action="store_true")
    args = ap.parse_args()
    model_type, kw = SHAPES[args.shape]
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    cfg = AutoConfig.for_model(model_type, **kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(1)
    t0 = time.time()
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    params = sum(p.numel() for p in model.parameters())
    os.makedirs(args.out, exist_ok=True)
    model_dir = os.path.join(args.out, "model")
    model.save_pretrained(model_dir, safe_serialization=True)
    print(f"{args.shape}: {params / 1e9:.2f}B params, made and saved in {time.time() - t0:.0f} s",
          flush=True)
    # The reference is the saved checkpoint loaded back as a user loads one. from_config under
    # torch.device("cuda") computes the RoPE inverse frequencies on the GPU, where torch's pow
    # (CUDA powf) and division by a Python scalar (a multiply by its reciprocal) round unlike the
    # CPU; from_pretrained computes them on the CPU (_init_weights) whatever the model's device.
    # For llama3-8b 5 of the 64 frequencies differ by one ulp (CUDA's powf emulated on the CPU),
    # which moves 9 bf16 sin values at positions < 256: the cause, by all we could check without a
    # GPU, of the 0.328 max |Δlogit| of 2026-11-24 (docs/benchmarks.md, 2026-11-26).
    del model
    if args.device == "cuda":
        torch.cuda.empty_cache()
    t0 = time.time()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(args.device).eval()
    print(f"{args.shape}: loaded back with from_pretrained in {time.time() - t0:.0f} s", flush=True)
    vocab = kw["vocab_size"]
    tokens = torch.randint(0, vocab, (4, 256), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = model(tokens.to(args.device)).logits.float().cpu()
    save_file({"tokens": tokens.contiguous(), "logits": logits.contiguous()},
              os.path.join(args.out, "ref.safetensors"))
    out = {"shape": args.shape, "params": params, "dtype": str(dtype)}
    if not args.no_generate:
        ids = torch.randint(0, vocab, (args.batch, args.prompt), device=args.device,
                            generator=torch.Generator(device=args.device).manual_seed(4))
        gen = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0,
                   eos_token_id=None, cache_implementation="static")
        with torch.no_grad():
            # Warm-up with the timed call's exact arguments: transformers compiles the static-cache
            # decode step for these shapes (batch, cache length), so a shorter warm-up would leave
            # the compile inside the timed call.
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new,
                           min_new_tokens=args.new, **gen)
            if args.device == "cuda":
                torch.cuda.synchronize()
            t = time.time()
            res = model.generate(ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=args.new, min_new_tokens=args.new, **gen)
            if args.device == "cuda":
                torch.cuda.synchronize()
            sec = time.time() - t
        new = res.shape[1] - args.prompt
        out["generate"] = {"batch": args.batch, "prompt": args.prompt, "new": new,
                           "seconds": sec, "tokens_per_s": args.batch * new / sec}
        print(f"HF generate (static cache): {args.batch * new / sec:.0f} tok/s", flush=True)
    with open(os.path.join(args.out, "hf.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
