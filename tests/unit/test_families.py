"""The architecture description is the one place a family differs (issue #36): no product code outside the family
adapters (npu_kernels/model/families/) branches on a family or architecture name, and the adapters describe what
mlir-air's code for each family runs."""

from __future__ import annotations

import ast
from pathlib import Path

from npu_kernels.model.architecture import assess, load_raw_config, resolve
from npu_kernels.model.description import GELU_TANH_GLU, SANDWICH, SLIDING
from npu_kernels.model.q4nx import LAYOUTS

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
ROOMS = ("npu_kernels", "handlers", "registry", "statemachine", "ledger")
FAMILY_WORDS = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma4",
                "mixtral", "smollm2", "lfm2")


def _names_a_family(node: ast.AST) -> bool:
    """A string constant naming an architecture (`...ForCausalLM`, `...ForConditionalGeneration`) or a family's
    model_type, or a tuple / list / set literal holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        v = node.value
        return v.endswith(("ForCausalLM", "ForConditionalGeneration")) or v.lower() in FAMILY_WORDS
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_a_family(e) for e in node.elts)


def _is_codec_layout(node: ast.AST) -> bool:
    """`layout == "qwen3"`: a Q4NX container layout (npu_kernels.model.q4nx.LAYOUTS, named after the mlir-air loader
    that reads it, chosen by `ledger quantize --layout`), not a model family."""
    return isinstance(node, ast.Name) and node.id == "layout"


def _family_branches(module: str, tree: ast.AST) -> list[str]:
    """Comparisons with a family name (`arch == "Qwen2ForCausalLM"`, `x in ("qwen3", ...)`, `"mistral" in arch`)
    and dicts keyed by one (a Q4NX codec layout's are not: `_is_codec_layout`, `LAYOUTS`)."""
    found = []
    for node in ast.walk(tree):
        sides = (node.left, *node.comparators) if isinstance(node, ast.Compare) else ()
        if any(_is_codec_layout(s) for s in sides):
            continue
        if isinstance(node, ast.Dict) and {getattr(k, "value", None) for k in node.keys} == set(LAYOUTS):
            continue
        if isinstance(node, ast.Compare) and any(_names_a_family(s) for s in sides):
            found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(k is not None and _names_a_family(k) for k in node.keys):
            found.append(f"{module}:{node.lineno}: a dict keyed by a family name")
    return found


def test_no_code_outside_the_family_adapters_branches_on_a_family_name():
    hits = []
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:3] == ("npu_kernels", "model", "families"):
                continue
            hits += _family_branches(".".join(rel.with_suffix("").parts), ast.parse(path.read_text()))
    assert hits == []


def test_the_family_branch_check_sees_comparisons_and_tables_but_not_a_keyword():
    tree = ast.parse('if arch == "Qwen2ForCausalLM":\n    pass\n'
                     'ok = "mistral" in arch.lower()\n'
                     'table = {"LlamaForCausalLM": (False, False)}\n'
                     'make(architecture="LlamaForCausalLM")\n')
    assert [h.split(":")[1] for h in _family_branches("m", tree)] == ["1", "3", "4"]


def test_phi4_mini_is_described_as_mlir_airs_phi4_mini_q4nx_runs_it():
    c = resolve(load_raw_config(CONFIGS / "phi-4-mini-instruct.json"))
    d = c.arch
    assert (c.n_layers, c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size) == \
        (32, 3072, 24, 8, 128, 8192, 200064)
    assert d.rotary_dim == 96 and d.rope_max_positions == 4096  # README.md:38-46, weights.py:55-58
    assert dict(d.fused) == {"self_attn.qkv_proj.weight": ("wq", "wk", "wv"),
                             "mlp.gate_up_proj.weight": ("w_gate", "w_up")}  # weights.py:238-247
    assert d.lm_head_partition == 16384 and -(-c.vocab_size // d.lm_head_partition) == 13  # prefill.py:57-58
    scaling = d.layers[0].rope.scaling_dict()
    assert scaling["rope_type"] == "longrope" and abs(scaling["attention_factor"] - 1.1902380714238083) < 1e-12


def test_gemma3_is_described_as_mlir_airs_gemma3_4b_q4nx_runs_it_its_text_decoder_deployed():
    raw = load_raw_config(CONFIGS / "gemma-3-4b-it.json")
    c = resolve(raw)
    d = c.arch
    windows = [x.window for x in d.layers]
    assert windows.count(None) == 5 and windows[5] is None and windows[0] == 1024  # (i+1) % 6 == 0 global
    assert {x.rope.theta for x in d.layers if x.mixer == SLIDING} == {10000.0}
    assert {(x.rope.theta, x.rope.scaling_dict()["factor"]) for x in d.layers if x.mixer != SLIDING} == {(1e6, 8.0)}
    assert d.mlp == GELU_TANH_GLU and d.norms == SANDWICH and d.norm_offset == 1.0 and d.qk_norm
    assert d.attn_scale == 0.0625 and d.embed_scale == 50.5  # sqrt(2560) = 50.596 rounded to bf16
    assert d.prefix == "model.language_model." and d.notes and -(-c.vocab_size // d.lm_head_partition) == 17
    assert assess(raw).in_scope and "text decoder" in d.notes[0] and "vision tower is not" in d.notes[0]


def test_the_known_missing_pieces_are_named_in_one_line():
    for arch, words in (("Gemma2ForCausalLM", "soft-capping"), ("Gemma4ForCausalLM", "per-layer embeddings"),
                        ("LlavaForConditionalGeneration", "vision tower")):
        a = assess({"architectures": [arch], "hidden_size": 64, "num_attention_heads": 4, "rms_norm_eps": 1e-6})
        assert not a.in_scope and len(a.reasons) == 1 and words in a.reasons[0] and arch in a.reasons[0]


def test_plan_answers_on_real_size_gemma3_and_phi4_mini_with_their_kernels():
    from npu_kernels.model.plan import plan

    gemma = plan(resolve(load_raw_config(CONFIGS / "gemma-3-4b-it.json")), "npu2")
    attention = {r.role: r for r in gemma if r.kernel == "flash_attention"}
    local, glob = attention["attention (sliding window 1024, 29 layers)"], attention["attention (global, 5 layers)"]
    assert local.shape["window"] == 1024 and "window" not in glob.shape and local.plan.legal and glob.plan.legal
    assert local.plan.tile["lkp"] == local.plan.tile["tile_q"] == 32  # fa_headfirst.py:54 at head_dim 256
    assert any(r.kernel == "gelu" and r.shape == {"N": 2048 * 10240} for r in gemma)
    assert not any(r.kernel == "silu_mul" for r in gemma)
    head = next(r for r in gemma if r.role == "LM head partition")
    assert head.shape == {"M": 16384, "K": 2560} and head.workarounds["lm_head_partitions"] == 17
    phi = plan(resolve(load_raw_config(CONFIGS / "phi-4-mini-instruct.json")), "npu2")
    assert {r.shape["rotary_dim"] for r in phi if r.kernel == "rope"} == {96}
    assert next(r for r in phi if r.role == "LM head partition").workarounds["lm_head_partitions"] == 13


def test_predict_answers_on_real_size_gemma3_with_the_elfs_its_prefill_code_compiles():
    from npu_kernels.perf.predict import predict

    p = predict(resolve(load_raw_config(CONFIGS / "gemma-3-4b-it.json")), seq=2048)
    elfs = [k.split(":", 1)[1] for k in p.per_elf if k.startswith("prefill:")]
    # gemma3_4b_q4nx_prefill.py:434-521 compile_all_kernels (one flash-attention ELF per mixer, costed alike)
    assert elfs == ["rms_qkv_qknorm_rope", "flash_attn", "o_norm_res_norm", "gate", "up", "gelu_mul",
                    "down_norm_add", "lm_head_gemv"]
    assert 0 < p.ttft_s < 60 and 0 < p.decode_tokens_per_s


def test_predict_answers_on_real_size_phi4_mini_with_the_elfs_its_prefill_code_compiles():
    from npu_kernels.perf.predict import predict

    p = predict(resolve(load_raw_config(CONFIGS / "phi-4-mini-instruct.json")), seq=2048)
    # phi4_mini_q4nx_prefill.py:114-145: the two llama32_3b stitchers + flash_attn, then a 13-partition LM head
    # (its comment at :56 says 8 partitions; the code's _LM_N_PARTITIONS at :58 is 13, which the plan follows)
    assert [k.split(":", 1)[1] for k in p.per_elf if k.startswith("prefill:")] == \
        ["rms_gemms_rope", "flash_attn", "o_ffn", "lm_head_gemv"]
    assert p.per_elf["prefill:lm_head_gemv"]["launches"] == 13
