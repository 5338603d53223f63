"""The HF transformers bf16 reference: a Runner over a local model folder, plus the Phase 0 baseline.

`HfRunner(folder)` loads the model in bf16 from the folder only (offline; nothing is downloaded), runs
greedy prefill/decode with transformers' own KV cache, and captures every decoder layer's raw output
(forward hooks, so the last layer's pre-final-norm output is kept too) and the final-norm output.

A folder holding `decode.requant` (a 4-bit deployment of the on-device style, npu_kernels.model.q4nx_device) is
the model as that deployment runs it: prefill with the folder's model.safetensors, every decode step with the
re-quantised decode weights (LM head untied from the embedding), swapped in place between the two.

`baseline(prompt)` is the Phase 0 evidence: the next-token distribution on the prompt must be finite and
not degenerate (collapsed on one token, flat, or within the token gate's KL max of uniform), judged against
`npu_kernels.thresholds.baseline_thresholds` (recorded with the numbers).
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.features import qk_norm, short_conv
from npu_kernels.model.q4nx_device import DECODE_FILE
from npu_kernels.model.runner import DecodeStepRecord, PrefillRecord
from npu_kernels.thresholds import baseline_thresholds
from npu_kernels.settings import env_default


def _torch():
    env_default("HF_HUB_OFFLINE", "1")
    env_default("TRANSFORMERS_OFFLINE", "1")
    import torch  # here, not at the top: torch / transformers are slow to import (the CLI starts without them)

    return torch


@contextmanager
def _one_thread(torch):
    """torch on one intra-op thread for a reference forward. The reference runs step by step between the
    pipeline's numpy/BLAS calls; with two OpenMP workers beside BLAS's own threads on a 2-core host each side
    spin-waits on the other, and a SmolLM2 decode step took 3.5x its standalone time (token gate, 4 prompts:
    29.1 s with torch's default threads, 16.9 s with one). The numbers do not move: SmolLM2's prefill logits,
    layer outputs and decode logits on three base prompts are bit-identical at one and two threads
    (2026-12-01); benchmarks time HF with torch's default threads (`forward_timed_prefill`)."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a local model folder (offline); one per process and folder, shared by the
    reference (`HfRunner.tokenizer`) and the callers that need only token ids (Phases 4-6 of the in-process
    backend, which then load no model to count the canonical prompt's tokens)."""
    return _load_tokenizer(str(folder))


@lru_cache(maxsize=8)
def _load_tokenizer(folder: str):
    _torch()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def softmax_stats(logits: np.ndarray) -> dict[str, float]:
    """top-1 probability and entropy (nats) of softmax(logits), in float64."""
    z = np.asarray(logits, np.float64)
    z = z - z.max()
    p = np.exp(z)
    p /= p.sum()
    nz = p[p > 0]
    return {"top1_prob": float(p.max()), "entropy": float(-(nz * np.log(nz)).sum())}


class HfRunner:
    """transformers in bf16 on CPU, greedy, from a local folder; implements the Runner protocol."""

    name = "hf_bf16"

    def __init__(self, folder: str | Path, *, threads: int | None = None) -> None:
        torch = _torch()
        from transformers import AutoModelForCausalLM

        self.folder = Path(folder)
        if threads:
            torch.set_num_threads(threads)
        self.model = AutoModelForCausalLM.from_pretrained(str(self.folder), dtype=torch.bfloat16,
                                                          local_files_only=True)
        self.model.eval()
        # transformers >= 5.2x names the KV cache argument/output `cache`; older ones `past_key_values`
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.config = resolve(load_raw_config(self.folder))
        self._past = None
        self._pos = 0
        self._captured: dict[str, Any] = {}
        self._capture = False
        # a Gemma3ForConditionalGeneration folder loads as that class: its text decoder is model.language_model
        inner = getattr(self.model.model, "language_model", self.model.model)
        for i, layer in enumerate(inner.layers):
            layer.register_forward_hook(self._hook(f"layer{i}"))
        # the final norm by the description's tensor name (LFM2's is `embedding_norm`, applied after the layers)
        getattr(inner, self.config.arch.final_norm.rsplit(".", 1)[0]).register_forward_hook(self._hook("norm"))
        self._swap: dict[str, tuple[Any, Any, Any]] = {}
        self._in_use = "prefill"
        # as transformers loaded it (the decode's weights untie the head below): what config_mismatches compares
        self._tied = bool(self.model.get_output_embeddings().weight.data_ptr()
                          == self.model.get_input_embeddings().weight.data_ptr())
        if (self.folder / DECODE_FILE).is_file():
            self._load_decode_weights(torch, self.folder / DECODE_FILE)

    def bf16_bits(self) -> dict[str, np.ndarray]:
        """Every parameter as its bf16 bits, HF name -> uint16 array sharing the parameter's memory (no copy): the
        pipeline of the same folder holds these instead of a copy of its own (npu_kernels.model.weights
        `load_weights`, issue 48 item 3). Empty for a folder with decode weights (`_use` swaps its tensors)."""
        torch = _torch()
        if self._swap:
            return {}
        return {name: t.detach().view(torch.int16).numpy().view(np.uint16)
                for name, t in self.model.state_dict(keep_vars=True).items() if t.dtype == torch.bfloat16}

    def _load_decode_weights(self, torch, path: Path) -> None:
        """Keep the decode's weights beside the prefill's (an untied LM head): `_use` swaps the tensors."""
        from safetensors.torch import load_file

        head = self.model.get_output_embeddings()
        head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=False)  # untie from the embedding
        params = dict(self.model.named_parameters())
        for name, t in load_file(str(path)).items():
            p = params.get(name)
            if p is None or tuple(p.shape) != tuple(t.shape):
                raise ValueError(f"{path.name}: {name} {list(t.shape)} does not match the model")
            self._swap[name] = (p, p.data, t.to(torch.bfloat16))

    def _use(self, which: str) -> None:
        """The prefill's or the decode's weights (only a folder with decode.requant has two sets)."""
        if self._swap and which != self._in_use:
            for p, pre, dec in self._swap.values():
                p.data = pre if which == "prefill" else dec
            self._in_use = which

    def _hook(self, key: str):
        def hook(_module, _inputs, output):
            if self._capture:
                out = output[0] if isinstance(output, tuple) else output
                self._captured[key] = out[0].detach().float().numpy()  # (seq, E)
        return hook

    @property
    def tokenizer(self):
        return load_tokenizer(self.folder)

    def prefill(self, prompt_tokens) -> PrefillRecord:
        torch = _torch()
        ids = torch.tensor(np.asarray(prompt_tokens, np.int64).reshape(1, -1))
        self._use("prefill")
        self._captured.clear()
        self._capture = True
        try:
            with torch.no_grad(), _one_thread(torch):
                out = self.model(ids, use_cache=True, logits_to_keep=1, return_dict=True)
        finally:
            self._capture = False
        self._past = getattr(out, self._cache_arg)
        self._pos = ids.shape[1]
        logits = out.logits[0, -1].float().numpy()
        layers = [{"ffn_out": self._captured[f"layer{i}"]} for i in range(self.config.n_layers)]
        return PrefillRecord(layer_intermediates=layers, final_hidden_normed=self._captured["norm"],
                             logits_at_pred=logits, top1_token=int(np.argmax(logits)))

    def decode_step(self, input_token: int, current_pos: int) -> DecodeStepRecord:
        torch = _torch()
        if self._past is None:
            raise RuntimeError("decode_step called before prefill")
        if current_pos != self._pos:
            raise ValueError(f"decode position {current_pos} does not follow the cache ({self._pos} positions)")
        self._use("decode")
        with torch.no_grad(), _one_thread(torch):
            out = self.model(torch.tensor([[int(input_token)]]), use_cache=True, logits_to_keep=1,
                             return_dict=True, **{self._cache_arg: self._past})
        self._past = getattr(out, self._cache_arg)
        self._pos += 1
        logits = out.logits[0, -1].float().numpy()
        return DecodeStepRecord(lm_head_logits=logits, top1_token=int(np.argmax(logits)))

    def conv_state(self, layer: int) -> np.ndarray | None:
        """A short-convolution layer's carried state after the last prefill / decode step, as the decode consumes
        it: the newest taps - 1 rows of transformers' conv cache (it keeps conv_L_cache rows, oldest first; the
        oldest falls out of the next step's window), (taps - 1, E) float32. None: no cache or no such state."""
        return short_conv.hf_conv_state(self._past, layer)

    def forward_timed_prefill(self, prompt_tokens) -> None:
        """Prefill without capturing intermediates (benchmarks)."""
        torch = _torch()
        ids = torch.tensor(np.asarray(prompt_tokens, np.int64).reshape(1, -1))
        self._use("prefill")
        with torch.no_grad():
            out = self.model(ids, use_cache=True, logits_to_keep=1, return_dict=True)
        self._past, self._pos = getattr(out, self._cache_arg), ids.shape[1]

    # --- Phase 0 -------------------------------------------------------------------------------------

    def baseline(self, prompt: str, raw_config: dict | None = None) -> dict[str, Any]:
        """HF bf16 prefill on `prompt`; fields match the `ReferenceBaselineRecorded` event."""
        tokens = self.tokenizer(prompt)["input_ids"]
        rec = self.prefill(tokens)
        logits = rec.logits_at_pred
        finite = bool(np.isfinite(logits).all())
        stats = softmax_stats(logits) if finite else {"top1_prob": float("nan"), "entropy": float("nan")}
        t = baseline_thresholds(int(logits.size))
        fin = logits[np.isfinite(logits)] if not finite else logits
        std = float(fin.std()) if fin.size else float("nan")
        passed = (finite and stats["top1_prob"] < t["top1_prob_max"] and stats["entropy"] > t["entropy_min"]
                  and stats["entropy"] < t["entropy_max"] and std > t["logit_std_min"])
        mismatches = self.config_mismatches(raw_config) if raw_config is not None else []
        return {
            "prompt": prompt,
            "n_prompt_tokens": len(tokens),
            "top1_token": rec.top1_token,
            "top1_text": self.tokenizer.decode([rec.top1_token]),
            "top1_prob": stats["top1_prob"],
            "entropy": stats["entropy"],
            "logits_finite": finite,
            "logit_max": float(fin.max()) if fin.size else float("nan"),
            "logit_min": float(fin.min()) if fin.size else float("nan"),
            "logit_mean": float(fin.mean()) if fin.size else float("nan"),
            "logit_std": std,
            "thresholds": dict(t),
            "passed": bool(passed),
            "config_mismatches": mismatches,
        }

    def config_mismatches(self, raw_config: dict) -> list[str]:
        """Fields where the model transformers actually built differs from what config.json resolves to."""
        ours = resolve(raw_config)
        hf = self.model.config
        params = getattr(hf, "rope_parameters", None) or {}
        theta = getattr(hf, "rope_theta", None) or params.get("rope_theta")
        embed = self.model.get_input_embeddings().weight
        layers = getattr(self.model.model, "language_model", self.model.model).layers
        layer0 = layers[0]
        # the first attention layer (a hybrid's first layers may be short convolutions, LFM2)
        attn = layers[next((i for i in range(len(layers)) if not ours.arch.is_conv(i)), 0)].self_attn
        down = layer0.get_submodule(dict(ours.arch.tensors)["w_down"].rsplit(".", 1)[0])
        loaded = {
            "n_layers": len(layers),
            "emb_dim": int(embed.shape[1]),
            "n_heads": int(hf.num_attention_heads),
            "n_kv_heads": int(getattr(hf, "num_key_value_heads", None) or hf.num_attention_heads),
            "head_dim": int(getattr(attn, "head_dim", ours.head_dim)),
            "hidden_dim": int(down.weight.shape[1]),
            "vocab_size": int(embed.shape[0]),
            "rope_theta": float(theta) if theta is not None else ours.rope_theta,
            "rms_norm_eps": float(getattr(hf, "rms_norm_eps", None) or hf.norm_eps),
            "tie_word_embeddings": self._tied,
            "qkv_bias": getattr(getattr(attn, "q_proj", None), "bias", None) is not None,
            "qk_norm": qk_norm.loaded_has(attn),
        }
        out = []
        for name, value in loaded.items():
            expected = getattr(ours, name)
            same = (abs(value - expected) <= 1e-9 * max(1.0, abs(expected)) if isinstance(expected, float)
                    else value == expected)
            if not same:
                out.append(f"{name}: config.json resolves to {expected!r}, the loaded model has {value!r}")
        return out
