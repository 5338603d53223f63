"""Tiny random-init decoder models saved as local HF folders, for fast numerics tests.

`build_tiny_model(kind, out_dir)` writes config.json + bf16 safetensors + a byte-level BPE tokenizer
(trained in memory on a fixed text, vocab 384) for one of:

  llama  2 layers, E 512, F 1024, 8 q / 4 kv heads, head_dim 64, untied embeddings, chat template
  qwen2  2 layers, E 512, F 1024, 8 q / 4 kv heads, head_dim 64, q/k/v biases, tied embeddings
  qwen3  2 layers, E 512, F 1024, 4 q / 2 kv heads, head_dim 128, per-head q/k RMSNorm, untied embeddings
  phi3   1 layer, E 512, F 1024, 8 q / 4 kv heads, head_dim 64, fused qkv_proj / gate_up_proj, partial rotary
         0.75 (48 of 64 dims), LongRoPE (short factors != 1, attention factor from max / original positions),
         untied embeddings (one layer with a tied head predicts its last token with p > 0.999: Phase 0's
         non-degeneracy check refuses it)
  gemma3 1 global + 1 sliding layer (window 32, shorter than every gate prompt), E 512, F 1024, 2 q / 1 kv heads,
         head_dim 256, QK-norm, four norms per layer (stored as w, applied as 1+w), GELU-tanh GLU, embedding
         scale sqrt(512), dual-theta RoPE (local 1e4, global 1e6 linear x8), untied embeddings (tied, the scaled
         embedding of the last token dominates: p > 0.999, as for the Phi-3)
  lfm2   LFM2's hybrid: layers conv, attention, conv (the short-convolution block around a QK-norm attention
         layer, 3 taps), E 512, F 1024 (block_auto_adjust_ff_dim off), 8 q / 4 kv heads, head_dim 64, RoPE 1e6,
         untied embeddings; the depthwise taps N(0, 1/3) (three taps of unit-scale h)

Small, but shaped like something NPU2 runs: head_dim 64 (128 for Qwen3) is what the RoPE and causal
FlashAttention tiles support, and K >= 512 keeps the high-precision GEMM atol (sized for large K) from being
tripped everywhere in Phase 1 (at K = 64 every fifth element misses it, on the emulator as on NPU2).

Every parameter is drawn from a fixed-seed numpy generator (independent of torch's init code):
  embeddings / LM head  N(0, (4/sqrt(E))²): the logits have a spread of ~4, so next-token distributions are
                        peaked (the top-5 gates do not flip on noise) but not one-hot (Phase 0's
                        non-degeneracy check must pass);
  projections           N(0, 1/fan_in): activations keep unit scale through the block, attention is not
                        saturated, and a faithful bf16/NPU2 datapath stays far above the block-gate floor
                        (a flat N(0, 0.25²) everywhere gave per-position cosines ~0.985 on the emulated NPU2
                        - the random model, not the datapath, would fail the gate);
  norm weights          1 + N(0, 0.2²);
  biases                N(0, 0.5²) - HF would zero them, which would hide a mishandled Qwen2 bias.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

VOCAB_SIZE = 384
HIDDEN, INTERMEDIATE = 512, 1024  # E, F
LOGIT_SPREAD = 4.0
EMBED_STD = LOGIT_SPREAD / HIDDEN**0.5  # embeddings and LM head: logits of spread ~LOGIT_SPREAD
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CORPUS = """\
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step.
Neural processing units run matrix multiplications in blocks of eight values with a shared exponent.
The model reads a prompt, predicts the next token, and appends it to the sequence one step at a time.
Attention compares every query with every key; the softmax turns the scores into weights over values.
In the morning the river was calm, and the boats waited by the harbour for the wind to turn.
Explain why the sky is blue. Write a short poem about the sea. List three prime numbers: 2, 3, 5, 7.
Once upon a time there was a small robot who wanted to learn how to paint the colours of the sunset.
def add(a, b):\n    return a + b\nfor i in range(10):\n    print(i * i)
The capital of France is Paris. Water boils at one hundred degrees Celsius at sea level.
"""

KINDS = {
    "llama": dict(arch="LlamaForCausalLM", model_type="llama", heads=8, kv_heads=4, head_dim=64,
                  tie=False, chat=True, rope_theta=10000.0),
    "qwen2": dict(arch="Qwen2ForCausalLM", model_type="qwen2", heads=8, kv_heads=4, head_dim=64,
                  tie=True, chat=False, rope_theta=1000000.0),
    "qwen3": dict(arch="Qwen3ForCausalLM", model_type="qwen3", heads=4, kv_heads=2, head_dim=128,
                  tie=False, chat=False, rope_theta=1000000.0),
    "phi3": dict(arch="Phi3ForCausalLM", model_type="phi3", heads=8, kv_heads=4, head_dim=64,
                 tie=False, chat=False, rope_theta=10000.0, layers=1),
}
SEEDS = {"llama": 11, "qwen2": 22, "qwen3": 33, "phi3": 44, "gemma3": 55, "lfm2": 66}
LFM2_LAYERS = ["conv", "full_attention", "conv"]
GEMMA3 = dict(arch="Gemma3ForCausalLM", model_type="gemma3_text", heads=2, kv_heads=1, head_dim=256, tie=False,
              chat=False, rope_theta=1000000.0)
LFM2 = dict(arch="Lfm2ForCausalLM", model_type="lfm2", tie=False, chat=False)
# Phi-3's LongRoPE: 24 short factors (the rotary width 48 / 2), not all 1 so that a mishandled factor shows;
# max_position_embeddings twice the original, so HF's attention factor sqrt(1 + ln 2 / ln 4096) scales cos/sin
PHI3_ROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
             "short_factor": [1.0 + 0.05 * i for i in range(24)], "long_factor": [4.0] * 24,
             "original_max_position_embeddings": 4096, "factor": 2.0}


def train_tokenizer(chat_template: str | None = None):
    """A byte-level BPE tokenizer trained in memory on CORPUS (deterministic), as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS.splitlines() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    if chat_template:
        fast.chat_template = chat_template
    return fast


def tiny_config(kind: str, vocab_size: int):
    """The transformers config of a tiny model of `kind` (llama / qwen2 / qwen3 / phi3 / gemma3 / lfm2)."""
    from transformers import AutoConfig

    if kind == "lfm2":
        return AutoConfig.for_model(
            "lfm2", architectures=["Lfm2ForCausalLM"], hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
            block_auto_adjust_ff_dim=False, num_hidden_layers=len(LFM2_LAYERS), layer_types=list(LFM2_LAYERS),
            num_attention_heads=8, num_key_value_heads=4, vocab_size=vocab_size, max_position_embeddings=512,
            norm_eps=1e-5, conv_L_cache=3, conv_bias=False, tie_word_embeddings=False, bos_token_id=0,
            eos_token_id=2, pad_token_id=None, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})

    spec = KINDS.get(kind) or GEMMA3
    fields = dict(
        architectures=[spec["arch"]], hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=spec.get("layers", 2),
        num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"], head_dim=spec["head_dim"],
        vocab_size=vocab_size, max_position_embeddings=512, rms_norm_eps=1e-6, hidden_act="silu",
        initializer_range=EMBED_STD, tie_word_embeddings=spec["tie"], bos_token_id=0, eos_token_id=2,
        pad_token_id=None, rope_parameters={"rope_type": "default", "rope_theta": spec["rope_theta"]},
    )
    if kind == "phi3":
        fields.update(rope_parameters=dict(PHI3_ROPE), partial_rotary_factor=0.75, max_position_embeddings=8192,
                      original_max_position_embeddings=4096, sliding_window=None)
    if kind == "gemma3":  # layer 0 sliding, layer 1 global (HF: every sliding_window_pattern-th layer is global)
        fields.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=256, sliding_window=32,
                      layer_types=["sliding_attention", "full_attention"], final_logit_softcapping=None,
                      attn_logit_softcapping=None,
                      rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                       "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
        del fields["hidden_act"]
    return AutoConfig.for_model(spec["model_type"], **fields)


def _fill_parameters(model, seed: int, gemma: bool = False) -> None:
    import torch

    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight") or "layernorm" in name:  # Gemma3 stores w and applies 1 + w
                values = (0.0 if gemma else 1.0) + 0.2 * rng.standard_normal(param.shape)
            elif name.endswith(".bias"):
                values = 0.5 * rng.standard_normal(param.shape)
            elif name.endswith("conv.conv.weight"):  # LFM2's depthwise taps (E, 1, taps)
                values = rng.standard_normal(param.shape) / np.sqrt(param.shape[-1])
            elif "embed_tokens" in name or "lm_head" in name:
                values = EMBED_STD * rng.standard_normal(param.shape)
            else:  # a projection (out, in): unit-scale activations
                values = rng.standard_normal(param.shape) / np.sqrt(param.shape[1])
            param.copy_(torch.from_numpy(values.astype(np.float32)))


def build_tiny_model(kind: str, out_dir: str | os.PathLike) -> Path:
    """Write a tiny random-init `kind` model (bf16 safetensors + tokenizer) into `out_dir`; returns it."""
    import torch
    from transformers import AutoModelForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = KINDS.get(kind) or (LFM2 if kind == "lfm2" else GEMMA3)
    tokenizer = train_tokenizer(CHAT_TEMPLATE if spec["chat"] else None)
    config = tiny_config(kind, len(tokenizer))
    torch.manual_seed(SEEDS[kind])
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _fill_parameters(model, SEEDS[kind], gemma=kind == "gemma3")
    if spec["tie"]:
        model.tie_weights()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def build_tiny_drafter(target_dir: str | os.PathLike, out_dir: str | os.PathLike, layers: int = 1) -> Path:
    """A drafter for speculative decoding from a tiny model folder: its first `layers` decoder layers with its
    embeddings, final norm, LM head and tokenizer (a truncated, early-exit copy: the same vocabulary, fewer layers,
    so it agrees with the target often but not always). Written into `out_dir`; returns it."""
    import json
    import re
    import shutil

    from safetensors.torch import load_file, save_file

    src, out = Path(target_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    config["num_hidden_layers"] = layers
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:layers]
    (out / "config.json").write_text(json.dumps(config, indent=2))
    kept = {}
    for file in sorted(src.glob("*.safetensors")):
        for name, tensor in load_file(file).items():
            m = re.match(r"model\.layers\.(\d+)\.", name)
            if m is None or int(m.group(1)) < layers:
                kept[name] = tensor
    save_file(kept, out / "model.safetensors", metadata={"format": "pt"})
    for file in src.iterdir():
        if file.suffix != ".safetensors" and file.name != "config.json" and file.is_file():
            shutil.copy2(file, out / file.name)
    return out


if __name__ == "__main__":  # python -m tests.models OUT_DIR : build all three for inspection
    import sys

    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    for k in KINDS:
        print(build_tiny_model(k, root / f"tiny-{k}"))
