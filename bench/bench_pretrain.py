#!/usr/bin/env python3
"""PyTorch side of the pretraining throughput benchmark (bench/bench_pretrain.cpp is KernelRL's).

The same training step on the same model shape and batch, written as a careful PyTorch user
would: fp32 parameters, torch.autocast(bfloat16), mean next-token cross-entropy on fp32 logits,
clip_grad_norm_ (foreach), torch.optim.AdamW with decay / no-decay groups (fused=True, or
foreach=True), one host sync per step for the finite check (as the C++ step). Modes: eager, or
torch.compile of the forward + loss (the optimizer step is one fused kernel already).

Models (--impl):
  hf     transformers' LlamaForCausalLM with the preset's config (sdpa attention, tied
         embeddings, rms_norm_eps 1e-5, rope theta 10000), the reference;
  torch  a self-contained Llama module below, equivalent to KernelRL's (model/llama.cpp) and to
         HF's (--check compares their logits); used where transformers is missing;
  auto   hf when transformers imports, else torch.
Prints one JSON line with the fields of bench_pretrain.cpp. FLOPs convention (the same there):
  flops_per_token = 6*N_matmul + 6*n_layers*T*d_attn  (N_matmul: every matmul weight, LM head
  included, input embedding excluded; causal attention counted as half of 12*L*T*d_attn)
  MFU = flops_per_token * tokens/s / peak (dense bf16: 989.4e12 on H100 SXM and H200).
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# model/llama.cpp preset_shape and ModelShape defaults.
PRESETS = {
    "tiny": dict(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=176),
    "small": dict(d_model=512, n_layers=8, n_heads=8, n_kv_heads=4, d_ff=1536),
    "base": dict(d_model=768, n_layers=12, n_heads=12, n_kv_heads=4, d_ff=2560),
}
ROPE_THETA = 10000.0
NORM_EPS = 1e-5
# trainer/trainer_config.h OptimizerConfig defaults.
BETAS, EPS, WEIGHT_DECAY = (0.9, 0.95), 1e-8, 0.1


def expected_num_parameters(s, vocab):
    """ModelShape::num_parameters (tied embeddings)."""
    hd = s["d_model"] // s["n_heads"]
    attn = s["d_model"] * hd * s["n_heads"] * 2 + s["d_model"] * hd * s["n_kv_heads"] * 2
    per_layer = attn + 3 * s["d_model"] * s["d_ff"] + 2 * s["d_model"]
    return vocab * s["d_model"] + s["n_layers"] * per_layer + s["d_model"]


# ---- a self-contained Llama (HF parameter names without "model.") ---------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):  # HF LlamaRMSNorm: normalize in fp32, cast back, then the weight
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + NORM_EPS)
        return self.weight * xf.to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.h, self.kv, self.hd = s["n_heads"], s["n_kv_heads"], s["d_model"] // s["n_heads"]
        d = s["d_model"]
        self.q_proj = nn.Linear(d, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=self.kv != self.h)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        d, f = s["d_model"], s["d_ff"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.self_attn = Attention(s)
        self.mlp = MLP(s)
        self.input_layernorm = RMSNorm(s["d_model"])
        self.post_attention_layernorm = RMSNorm(s["d_model"])

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class Llama(nn.Module):
    def __init__(self, s, vocab, checkpointing=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, s["d_model"])
        self.layers = nn.ModuleList(DecoderLayer(s) for _ in range(s["n_layers"]))
        self.norm = RMSNorm(s["d_model"])
        hd = s["d_model"] // s["n_heads"]
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.checkpointing = checkpointing
        for name, p in self.named_parameters():  # HF init: normal(0, 0.02), unit norms
            if "norm" in name:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        pos = torch.arange(ids.shape[1], device=ids.device, dtype=torch.float32)
        angle = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((angle, angle), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            if self.checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return F.linear(self.norm(x), self.embed_tokens.weight)  # tied LM head


def hf_model(s, vocab, seq_len, checkpointing):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=s["d_model"], intermediate_size=s["d_ff"],
                      num_hidden_layers=s["n_layers"], num_attention_heads=s["n_heads"],
                      num_key_value_heads=s["n_kv_heads"],
                      max_position_embeddings=max(2048, seq_len), rms_norm_eps=NORM_EPS,
                      tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
                      hidden_act="silu", attn_implementation="sdpa")
    theta = getattr(cfg, "rope_theta", None)
    if theta is None:
        theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
    assert theta == ROPE_THETA, f"HF rope theta {theta} != {ROPE_THETA}"
    model = LlamaForCausalLM(cfg)
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def make_model(impl, s, vocab, seq_len, checkpointing):
    if impl == "hf":
        model = hf_model(s, vocab, seq_len, checkpointing)
        return model, lambda ids: model(input_ids=ids, use_cache=False).logits
    model = Llama(s, vocab, checkpointing)
    return model, model


def count_params(model, vocab, d_model):
    total = sum(p.numel() for p in model.parameters())  # a tied matrix counts once
    proj = sum(p.numel() for n, p in model.named_parameters() if "_proj." in n)
    embedding = vocab * d_model
    return total, total - embedding, proj + embedding  # + the LM head (V*d)


def known_peak_flops(name):
    if "H200" in name or ("H100" in name and "PCIe" not in name and "NVL" not in name):
        return 989.4e12
    return 0.0


def check_against_hf(args):
    """CPU: the self-contained module and LlamaForCausalLM, same weights, same logits."""
    s = PRESETS[args.preset]
    torch.manual_seed(0)
    hf = hf_model(s, args.vocab, args.seq_len, False).eval()
    mine = Llama(s, args.vocab).eval()
    state = {k.removeprefix("model."): v for k, v in hf.state_dict().items()
             if k != "lm_head.weight"}
    missing, unexpected = mine.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    ids = torch.randint(0, args.vocab, (2, args.seq_len))
    with torch.no_grad():
        a = hf(input_ids=ids, use_cache=False).logits
        b = mine(ids)
    diff = (a - b).abs().max().item()
    out = {"check": "hf_vs_torch_logits", "preset": args.preset, "max_abs_diff": diff,
           "params_hf": count_params(hf, args.vocab, s["d_model"])[0],
           "params_torch": count_params(mine, args.vocab, s["d_model"])[0],
           "params_kernelrl": expected_num_parameters(s, args.vocab)}
    print(json.dumps(out), flush=True)
    ok = diff < 1e-4 and out["params_hf"] == out["params_torch"] == out["params_kernelrl"]
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", default="auto", choices=["auto", "hf", "torch"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--optimizer", default="fused", choices=["fused", "foreach"])
    ap.add_argument("--preset", default="base", choices=sorted(PRESETS))
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--ckpt", type=int, default=0, help="1: activation checkpointing per layer")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--label", default="")
    ap.add_argument("--check", action="store_true",
                    help="compare the torch module's logits with HF's on the CPU and exit")
    args = ap.parse_args()
    if args.impl == "auto":
        try:
            import transformers  # noqa: F401
            args.impl = "hf"
        except ImportError:
            args.impl = "torch"
    if args.check:
        return check_against_hf(args)

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    cuda = device.type == "cuda"
    s = PRESETS[args.preset]
    torch.manual_seed(1)
    model, forward = make_model(args.impl, s, args.vocab, args.seq_len, args.ckpt != 0)
    model.to(device).train()
    total, non_embedding, matmul = count_params(model, args.vocab, s["d_model"])
    d_attn = s["d_model"]  # n_heads * head_dim
    flops_per_token = 6.0 * matmul + 6.0 * s["n_layers"] * args.seq_len * d_attn

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = args.optimizer if cuda else "for-loop"  # fused/foreach: CUDA paths here
    kind = {"fused": dict(fused=True), "foreach": dict(foreach=True),
            "for-loop": dict(foreach=False)}[optimizer]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=BETAS, eps=EPS, **kind)

    def forward_loss(inputs, targets):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            logits = forward(inputs)
            return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                   targets.reshape(-1))

    step_loss = torch.compile(forward_loss) if args.mode == "compile" else forward_loss

    def train_step(micro_batches):
        opt.zero_grad(set_to_none=True)
        losses = []
        for inputs, targets in micro_batches:
            loss = step_loss(inputs, targets)
            (loss / len(micro_batches)).backward()
            losses.append(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        host = torch.stack(losses + [norm]).double().cpu()  # the step's one host sync
        if not torch.isfinite(host).all():
            raise RuntimeError(f"loss or grad norm not finite: {host.tolist()}")
        opt.step()
        return host[:-1].mean().item()

    gen = torch.Generator().manual_seed(2)
    data = []
    for _ in range(args.warmup + args.steps):
        micro = []
        for _ in range(args.grad_accum):
            rows = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=gen)
            rows = rows.to(device)
            micro.append((rows[:, :-1], rows[:, 1:]))
        data.append(micro)

    print(f"{args.impl} {args.mode}: {total / 1e6:.1f}M params on {device}", file=sys.stderr)
    t_warm = time.perf_counter()
    loss_first = None
    for i in range(args.warmup):
        loss = train_step(data[i])
        loss_first = loss if loss_first is None else loss_first
    warmup_s = time.perf_counter() - t_warm
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss_last = train_step(data[args.warmup + i])
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0

    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    peak = args.peak_tflops * 1e12 if args.peak_tflops > 0 else known_peak_flops(name)
    tokens_per_s = args.steps * args.grad_accum * args.batch * args.seq_len / seconds
    out = {
        "impl": f"pytorch-{args.impl}", "mode": args.mode,
        "optimizer": optimizer,
        "preset": args.preset, "ckpt": args.ckpt != 0, "batch": args.batch,
        "seq_len": args.seq_len, "grad_accum": args.grad_accum, "params_total": total,
        "params_non_embedding": non_embedding, "params_matmul": matmul,
        "params_kernelrl": expected_num_parameters(s, args.vocab),
        "flops_per_token": flops_per_token, "warmup": args.warmup, "steps": args.steps,
        "warmup_s": warmup_s, "step_ms": 1e3 * seconds / args.steps,
        "tokens_per_s": tokens_per_s,
        "mfu": flops_per_token * tokens_per_s / peak if peak > 0 else None,
        "peak_tflops": peak / 1e12 if peak > 0 else None,
        "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
        "device": name, "torch": torch.__version__, "loss_first": loss_first,
        "loss_last": loss_last, "label": args.label,
    }
    if args.impl == "hf":
        import transformers
        out["transformers"] = transformers.__version__
    assert math.isfinite(loss_last)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
