#!/usr/bin/env python3
"""HF side of the generation benchmark (bench/bench_generate.cpp is the KernelRL side).

An equal-shaped random LlamaForCausalLM (preset base: d 768, 12 layers, heads 12/4, ff 2560,
vocab 32000, tied) in bf16 on CUDA; random prompts of one length; `generate` with sampling at
temperature 1 (top_k 0, top_p 1) and min_new_tokens = max_new_tokens so every row decodes the
full budget. Prints one JSON line per timed run, with cache "dynamic" or "static".
tokens_per_s = batch * new / wall seconds (prefill included), as on the C++ side.
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--caches", default="dynamic,static")
    args = ap.parse_args()
    cfg = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2560,
                      num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                      max_position_embeddings=2048, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    torch.manual_seed(1)
    model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 32000, (args.batch, args.prompt), device="cuda")
    mask = torch.ones_like(ids)
    for cache in args.caches.split(","):
        kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0,
                  eos_token_id=None)
        if cache == "static":
            kw["cache_implementation"] = "static"
        try:
            with torch.no_grad():
                model.generate(ids, attention_mask=mask, max_new_tokens=16, min_new_tokens=16, **kw)
                for r in range(args.repeats):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    out = model.generate(ids, attention_mask=mask, max_new_tokens=args.new,
                                         min_new_tokens=args.new, **kw)
                    torch.cuda.synchronize()
                    dt = time.perf_counter() - t0
                    gen = (out.shape[1] - args.prompt) * args.batch
                    print(json.dumps({"impl": "hf", "cache": cache, "batch": args.batch,
                                      "prompt": args.prompt, "new": args.new, "generated": gen,
                                      "seconds": round(dt, 3), "tokens_per_s": round(gen / dt)}),
                          flush=True)
        except Exception as e:  # a cache mode that does not work here is reported, not fatal
            print(json.dumps({"impl": "hf", "cache": cache, "error": str(e)[:300]}), flush=True)


if __name__ == "__main__":
    main()
