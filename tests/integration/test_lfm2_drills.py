"""LFM2's drills (issue #37): which gate catches each, on the tiny LFM2 (layers conv, attention, conv) run on the
emulated NPU2 against HF bf16.

  conv_look_ahead     a convolution that reads one row ahead: the Phase 2 block gate (layer 0 is a conv block)
  conv_taps_reversed  the taps newest-first: the Phase 2 block gate (and, as a kernel, the conv1d row with its
                      nonzero pad: tests/unit/test_conv_kernels.py)
  conv_state_dropped  the prefill's state not carried into the decode: invisible to the block gate (prefill only),
                      caught by the carried-state check (npu_kernels.model.features.short_conv) and by the token gate

The production pipeline passes all three checks; the carried state matches HF's conv cache."""

from __future__ import annotations

import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.compare import block_gate, block_kernel_order
from npu_kernels.model.features.short_conv import carried_state_check
from npu_kernels.model.faults import build_pipeline
from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.prompts import canonical_tokens
from npu_kernels.model.weights import load_weights
from npu_kernels.numerics.executors.emulated import EmulatedExecutor

DRILLS = ("conv_look_ahead", "conv_taps_reversed", "conv_state_dropped")


@pytest.fixture(scope="module")
def lfm2(tiny_lfm2):
    cfg = resolve(load_raw_config(tiny_lfm2))
    tokens = canonical_tokens(tiny_lfm2)
    ref = HfRunner(tiny_lfm2).prefill(tokens).layer_intermediates[0]["ffn_out"]
    return tiny_lfm2, load_weights(tiny_lfm2, cfg), cfg, tokens, ref


def _pipe(lfm2, faults=()):
    _, weights, cfg, _, _ = lfm2
    return build_pipeline(weights, cfg, EmulatedExecutor("npu2"), PipelineOptions(faults=frozenset(faults)))


def _checks(lfm2, faults=()):
    folder, _, cfg, tokens, ref = lfm2
    ours = _pipe(lfm2, faults).prefill(tokens).layer_intermediates[0]["ffn_out"]
    block = block_gate(ours, ref, cfg.head_dim, n_positions=len(tokens))
    state = carried_state_check(_pipe(lfm2, faults), HfRunner(folder), tokens)
    return block, state


def test_the_production_pipeline_passes_the_block_gate_and_the_carried_state_check(lfm2):
    block, state = _checks(lfm2)
    assert block.passed and state.passed, (block, state)
    assert [x["layer"] for x in state.layers] == [0, 2]
    assert state.top1_agrees


@pytest.mark.parametrize("fault,block_catches", [("conv_look_ahead", True), ("conv_taps_reversed", True),
                                                 ("conv_state_dropped", False)])
def test_each_drill_is_caught_and_by_which_check(lfm2, fault, block_catches):
    block, state = _checks(lfm2, {fault})
    assert block.passed is not block_catches
    assert not state.passed  # every drill moves the next token's logits, the state drill the state itself
    if fault == "conv_state_dropped":
        assert state.logits_cosine < 0.9


def test_the_block_bisect_of_a_conv_layer_swaps_its_own_kernels(lfm2):
    order = block_kernel_order(lfm2[2])
    assert "conv1d" in order and "eltwise_mul" in order and "flash_attention" not in order
