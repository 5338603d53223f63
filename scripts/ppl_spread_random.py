"""The reference's own precision spread on random-weight models of published sizes: transformers in bf16 (the
token gate's reference) against the same weights in FP32, teacher-forced on the bf16 model's greedy tokens, with the
token gate's statistics (npu_kernels.thresholds: top-5 inclusion, KL(reference || ours) per step, the perplexity
ratio) and the reference's next-token entropy against Phase 0's near-uniform bound (log V - TF_KL_MAX). Standalone
(torch and transformers only, no project import) so that it runs where a GPU is; on a CPU it is slow at 1B.

Two initialisations: transformers' default (N(0, 0.02^2): logits spread ~0.3, a near-uniform model) and the tiny
test models' (tests/models.py: embeddings and LM head N(0, (4/sqrt(E))^2), projections N(0, 1/fan_in), norms 1).
Usage: python scripts/ppl_spread_random.py [--device cuda] [--prompts 8]"""

from __future__ import annotations

import argparse
import math

import torch
from transformers import AutoConfig, AutoModelForCausalLM

TF_KL_MAX, TOP_K, STEPS = 2.0, 5, 32
SIZES = {  # (model_type, hidden, intermediate, layers, heads, kv heads, head_dim, vocab): the published configs
    "Llama-3.2-1B": ("llama", 2048, 8192, 16, 32, 8, 64, 128256),
    "Qwen3-0.6B": ("qwen3", 1024, 3072, 28, 16, 8, 128, 151936),
    "SmolLM2-135M": ("llama", 576, 1536, 30, 9, 3, 64, 49152),
}


def build(name: str, init: str, device: str, seed: int = 0):
    kind, E, F, L, H, Hkv, D, V = SIZES[name]
    cfg = AutoConfig.for_model(kind, hidden_size=E, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H,
                               num_key_value_heads=Hkv, head_dim=D, vocab_size=V, tie_word_embeddings=False,
                               max_position_embeddings=4096)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).to(device).eval()
    if init == "spread4":
        g = torch.Generator(device=device).manual_seed(seed)
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if p.ndim == 1:
                    p.fill_(1.0)
                elif "embed_tokens" in pname or "lm_head" in pname:
                    p.normal_(0.0, 4.0 / math.sqrt(E), generator=g)
                else:
                    p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=g)
    return model, V


@torch.no_grad()
def walk(ref, ours, prompt: torch.Tensor) -> dict:
    """The reference's greedy tokens (KV-cached, as the HF reference decodes) and both sides' next-token
    distributions at each of STEPS steps, teacher-forced on those tokens."""
    ids = prompt[None]
    out = ref(ids, use_cache=True)
    past, logits_r = out.past_key_values, [out.logits[0, -1].float()]
    toks = []
    for _ in range(STEPS):
        t = int(torch.argmax(logits_r[-1]))
        toks.append(t)
        if len(toks) == STEPS:
            break
        out = ref(torch.tensor([[t]], device=ids.device), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits_r.append(out.logits[0, -1].float())
    full = torch.cat([prompt, torch.tensor(toks[:-1], device=ids.device)])[None]
    logits_o = ours(full).logits[0, len(prompt) - 1:].float()
    kls, lp_r, lp_o, inside, entropy = [], [], [], 0, None
    for i, t in enumerate(toks):
        a, b = torch.log_softmax(logits_r[i], -1), torch.log_softmax(logits_o[i], -1)
        if entropy is None:
            entropy = float(-(a.exp() * a).sum())
        kls.append(float((a.exp() * (a - b)).sum()))
        lp_r.append(float(a[t]))
        lp_o.append(float(b[t]))
        tr, to = torch.topk(logits_r[i], TOP_K).indices.tolist(), torch.topk(logits_o[i], TOP_K).indices.tolist()
        inside += int(tr[0] in to and to[0] in tr)
    ppl = math.exp(sum(r - o for r, o in zip(lp_r, lp_o)) / len(lp_r))
    return {"ppl": ppl, "kl_mean": sum(kls) / len(kls), "kl_max": max(kls), "top5": inside, "entropy": entropy}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--prompts", type=int, default=8)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("model  init  | PPL ratio fp32/bf16 min..max | KL mean max | KL max | top-5 min | entropy (log V, "
          "Phase 0 bound)")
    for name in SIZES:
        for init in ("hf-default", "spread4"):
            fp32, V = build(name, init, args.device)
            bf16 = build(name, init, args.device)[0].to(torch.bfloat16)
            g = torch.Generator().manual_seed(1)
            rows = [walk(bf16, fp32, torch.randint(0, V, (24,), generator=g).to(args.device))
                    for _ in range(args.prompts)]
            ppl = [r["ppl"] for r in rows]
            print(f"{name} {init} | {min(ppl):.4f}..{max(ppl):.4f} | {max(r['kl_mean'] for r in rows):.4g} | "
                  f"{max(r['kl_max'] for r in rows):.4g} | {min(r['top5'] for r in rows)}/{STEPS} | "
                  f"{min(r['entropy'] for r in rows):.3f}..{max(r['entropy'] for r in rows):.3f} "
                  f"({math.log(V):.3f}, {math.log(V) - TF_KL_MAX:.3f})", flush=True)
            del fp32, bf16
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
