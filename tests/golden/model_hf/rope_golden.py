#!/usr/bin/env python3
"""Golden RoPE tables from transformers (an independent implementation) for test_model_llama's
RopeGolden tests: LlamaRotaryEmbedding's inverse frequencies for Llama-3 rope scaling (and two
unscaled configurations), and its cos/sin tables for the Llama-3.1-8B configuration.

  rope_golden.py [OUT]   (default: rope_golden.safetensors beside this script)

The frequencies are computed on the CPU, as transformers' from_pretrained computes them for a
loaded checkpoint (_init_weights runs the rope function on the default device and copies the
result into the model's buffer, whatever device the model is on). Written:
  configs   [N, 6] float64: rope_theta, head_dim, factor, low_freq_factor, high_freq_factor,
            original_max_position_embeddings per configuration (factor 0: rope_type default)
  inv_freq.<i>  [head_dim/2] float32: LlamaRotaryEmbedding(config).inv_freq of configuration i
  positions     [P] int64: 0..63 and 64 positions spread up to 131071 (Llama 3.1's context)
  cos, sin      [P, 128] float32: LlamaRotaryEmbedding.forward of configuration 0 (Llama-3.1-8B)
                at `positions` for an fp32 input; a bf16 input gets these rounded to bf16.
Generated with torch 2.11 and transformers 5.24 on an x86-64 CPU (AVX-512; torch's AVX2 kernels
give the same bits).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

# (rope_theta, head_dim, factor, low_freq_factor, high_freq_factor, original_max_position).
CONFIGS = [
    (5e5, 128, 8.0, 1.0, 4.0, 8192),  # Llama-3.1-8B/70B/405B (bench/hf_policy_ref.py's llama3-8b)
    (5e5, 64, 32.0, 1.0, 4.0, 8192),  # Llama-3.2-1B
    (5e5, 128, 32.0, 1.0, 4.0, 8192),  # Llama-3.2-3B
    (1e4, 16, 8.0, 1.0, 4.0, 64),  # hf_parity.py's tiny llama3 variant
    # Llama-3 scaling on a θ = 10000 base: here computing 2π / inv_freq as one division (instead
    # of Python's reciprocal-then-multiply) moves some medium-band frequencies by one ulp.
    (1e4, 128, 8.0, 1.0, 4.0, 8192),
    (1e4, 64, 8.0, 1.0, 4.0, 8192),
    (1e4, 128, 4.0, 2.0, 8.0, 16384),
    (1e6, 128, 0.0, 0.0, 0.0, 0),  # unscaled: Qwen2.5
    (5e5, 128, 0.0, 0.0, 0.0, 0),  # unscaled, Llama-3's θ
]


def rotary_of(theta, head_dim, factor, low, high, old):
    if factor == 0:
        rope = dict(rope_type="default", rope_theta=theta)
    else:
        rope = dict(rope_type="llama3", rope_theta=theta, factor=factor, low_freq_factor=low,
                    high_freq_factor=high, original_max_position_embeddings=int(old))
    cfg = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, num_key_value_heads=2,
                      head_dim=head_dim, max_position_embeddings=131072, rope_parameters=rope)
    with torch.device("cpu"):
        return LlamaRotaryEmbedding(cfg)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "rope_golden.safetensors")
    tensors = {"configs": torch.tensor(CONFIGS, dtype=torch.float64)}
    for i, c in enumerate(CONFIGS):
        tensors[f"inv_freq.{i}"] = rotary_of(*c).inv_freq.clone()
    spread = torch.logspace(6, 17, 64, base=2.0).round().to(torch.int64).clamp_max(131071)
    positions = torch.cat([torch.arange(64), spread])
    assert positions.unique().numel() == positions.numel()
    rotary = rotary_of(*CONFIGS[0])
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions.unsqueeze(0))
        cos16, sin16 = rotary(torch.zeros(1, dtype=torch.bfloat16), positions.unsqueeze(0))
    # transformers' bf16 tables are its fp32 ones rounded (the test relies on it).
    assert torch.equal(cos16, cos.bfloat16()) and torch.equal(sin16, sin.bfloat16())
    tensors.update(positions=positions, cos=cos[0].contiguous(), sin=sin[0].contiguous())
    save_file(tensors, out)
    print(f"wrote {out}: {len(CONFIGS)} configurations, {positions.numel()} positions")


if __name__ == "__main__":
    main()
