"""The new families' drills are caught at Phase 2, the phase that should catch a broken block (issue #36): on the
canonical prompt (longer than the tiny Gemma3's 32-position window), the emulated pipeline's layer-0 output with the
fault fails the block gate against HF bf16, and without it passes. tests/e2e/test_deploy_phi3.py and
test_deploy_gemma3.py show the same faults caught by the token gate (`ledger verify-model --inject`)."""

from __future__ import annotations

import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.compare import block_gate
from npu_kernels.model.faults import build_pipeline
from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.prompts import canonical_tokens
from npu_kernels.model.weights import load_weights
from npu_kernels.numerics.executors.emulated import EmulatedExecutor


@pytest.fixture(scope="module")
def models(tiny_phi3, tiny_gemma3):
    out = {}
    for kind, folder in (("phi3", tiny_phi3), ("gemma3", tiny_gemma3)):
        cfg = resolve(load_raw_config(folder))
        tokens = canonical_tokens(folder)
        ref = HfRunner(folder).prefill(tokens).layer_intermediates[0]["ffn_out"]
        out[kind] = (load_weights(folder, cfg), cfg, tokens, ref)
    return out


def _layer0_gate(models, kind: str, faults: frozenset[str]):
    weights, cfg, tokens, ref = models[kind]
    pipe = build_pipeline(weights, cfg, EmulatedExecutor("npu2"), PipelineOptions(faults=faults))
    ours = pipe.prefill(tokens).layer_intermediates[0]["ffn_out"]
    return block_gate(ours, ref, cfg.head_dim, n_positions=len(tokens))


@pytest.mark.parametrize("kind,fault", [("phi3", "rotary_full_width"), ("phi3", "qkv_split_order"),
                                        ("gemma3", "window_ignored"), ("gemma3", "norm_fold_missing")])
def test_each_new_family_drill_fails_the_block_gate_that_passes_without_it(models, kind, fault):
    assert len(models[kind][2]) > 32  # the canonical prompt outruns the window
    assert _layer0_gate(models, kind, frozenset()).passed
    assert not _layer0_gate(models, kind, frozenset({fault})).passed
