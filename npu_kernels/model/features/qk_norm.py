"""QK-norm: a per-head RMSNorm of q and k (weights of head_dim) before RoPE, with the model's eps. Everything the
tool knows about it is here:

  config keys     none: a family's attention implies it (Qwen3, Gemma3, LFM2's `q_layernorm`) - `Family.features`;
  tensors         `q_norm` / `k_norm` (the description's QK_NORM_FIELDS; a family maps their HF names), of
                  head_dim each (`SHAPES`);
  reference       `apply`: the rmsnorm kernel over q and k with heads as rows (the pipeline's "qk_norm" stage);
  plan            `plan_rows`: RMSNorm seq x D, once per head (kernel_registry/details/RMSNorm_bf16.md:104,115 at
                  e972f29: "2048x128 ... Qwen3-0.6B + Qwen3-1.7B QK-norm (per-head, N=head_dim)");
  perf            `launches`: the q and k norm launches of the attention input; the ELF with the norm inside
                  (`rms_qkv_qknorm_rope`) is named by npu_kernels.perf.dispatch from `ModelConfig.qk_norm`;
  loaded check    the HF model has `q_norm` or `q_layernorm` (`loaded_has`)."""

from __future__ import annotations

from npu_kernels.model.features import Feature

TENSORS = ("q_norm", "k_norm")
# LayerWeights field -> (HF shape from the config, transposed at load) (npu_kernels.model.weights reads them)
SHAPES = {"q_norm": (lambda c: (c.head_dim,), False), "k_norm": (lambda c: (c.head_dim,), False)}
HF_MODULES = ("q_norm", "q_layernorm")  # transformers' attribute of the attention module (Qwen3/Gemma3, LFM2)


def apply(pipeline, layer: int, q_rows, k_rows):
    """q and k (rows of head_dim) each through the rmsnorm kernel with their per-head weights; unchanged for a
    layer without them."""
    lw, c, k = pipeline.weights.layers[layer], pipeline.config, pipeline.k
    if lw.q_norm is None:
        return q_rows, k_rows
    with pipeline._stage("qk_norm", "rmsnorm"):
        return k.rmsnorm(q_rows, lw.q_norm, c.rms_norm_eps), k.rmsnorm(k_rows, lw.k_norm, c.rms_norm_eps)


def plan_rows(c, seq: int, row) -> list:
    """The q/k norm row: RMSNorm seq x D per head (none without QK-norm). `row` builds a plan row."""
    if not c.qk_norm:
        return []
    return [row("rmsnorm", {"M": seq, "N": c.head_dim}, "prefill", ["q/k"],
                f"norm (per head, {c.n_heads}+{c.n_kv_heads} calls)")]


def launches(c, rows: int, size: dict[str, int], static: set[str], launch) -> list:
    """The performance model's q and k norm launches (npu_kernels.perf.dispatch) over `rows` positions (the
    prefill's S, a decode step's 1): RMSNorm of heads x rows rows of head_dim; their outputs and weights added to
    `size` / `static`. `launch` builds a dispatch Launch."""
    D, H, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
    size.update({"q_n": rows * H * D, "k_n": rows * Hkv * D, "w_qn": D, "w_kn": D})
    static |= {"w_qn", "w_kn"}
    return [launch("rmsnorm", {"M": H * rows, "N": D}, "q norm", ("q", "w_qn"), ("q_n",)),
            launch("rmsnorm", {"M": Hkv * rows, "N": D}, "k norm", ("k", "w_kn"), ("k_n",))]


def loaded_has(attn) -> bool:
    """Whether a loaded transformers attention module normalises q and k."""
    return any(hasattr(attn, name) for name in HF_MODULES)


FEATURE = Feature("qk_norm", (), present=lambda arch: arch.qk_norm, tensors=TENSORS)
