"""The model features (issue 47 item 2): each feature one module of npu_kernels/model/features/, the family adapters
naming the ones they describe, and a family that only combines existing features is its adapter alone - the
generic rooms (architecture, plan, pipeline, perf) ask the features, never the family."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from npu_kernels.model import families
from npu_kernels.model.architecture import assess, load_raw_config, resolve
from npu_kernels.model.description import SLIDING, Layer, rope_of
from npu_kernels.model.families.common import Family, rope_scaling, rope_theta
from npu_kernels.model.families.llama import describe_llama_form
from npu_kernels.model.features import registry, sliding_window, used_by
from npu_kernels.model.options import FAULTS
from npu_kernels.model.plan import plan
from npu_kernels.model.weights import LayerWeights
from npu_kernels.perf.dispatch import dispatch_plan

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
IN_SCOPE = ("qwen3-0.6b.json", "qwen2.5-0.5b.json", "llama-3.2-1b.json", "gemma-3-4b-it.json",
            "phi-4-mini-instruct.json", "lfm2-1.2b.json")


def test_every_feature_an_adapter_names_is_a_registered_module_with_real_drills_and_tensors():
    features, layer_fields = registry(), {f.name for f in fields(LayerWeights)}
    assert {f.name for f in families.FAMILIES} >= {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3", "lfm2"}
    for family in families.FAMILIES:
        assert set(family.features) <= set(features), family.name
    for feature in features.values():
        assert set(feature.faults) <= FAULTS, feature.name
        assert set(feature.tensors) <= layer_fields, feature.name


@pytest.mark.parametrize("name", IN_SCOPE)
def test_a_described_model_uses_exactly_the_features_its_adapter_names(name):
    raw = load_raw_config(CONFIGS / name)
    config = resolve(raw)
    family = families.family_of(config.architecture)
    assert set(used_by(config.arch)) == set(family.features)


def _windowed_qk_norm_family() -> Family:
    """A family that exists only in this test: the Llama form with QK-norm and Gemma3-style sliding layers - two
    existing features combined, in one adapter and nothing else."""

    def describe(raw, c):
        base = describe_llama_form(raw, c, "windowed_qk", qk_norm=True)
        rope = rope_of(rope_theta(raw), rope_scaling(raw))
        layers = tuple(Layer(mixer=SLIDING, window=sliding_window.width(raw), rope=rope)
                       if kind == sliding_window.SLIDING_KIND else Layer(rope=rope)
                       for kind in sliding_window.layer_kinds(raw))
        return replace(base, layers=layers)

    def problems(raw, arch):
        return sliding_window.problems(raw, arch)

    return Family("windowed_qk", ("WindowedQkForCausalLM",), (), describe, problems,
                  features=("qk_norm", "sliding_window"), malformed=sliding_window.malformed)


def test_a_family_of_existing_features_is_its_adapter_alone():
    raw = {**load_raw_config(CONFIGS / "qwen3-0.6b.json"), "sliding_window": 512, "sliding_window_pattern": 4}
    family = _windowed_qk_norm_family()
    assert family.problems(raw, "WindowedQkForCausalLM") == [] and family.malformed(raw) == []
    sizes = resolve(load_raw_config(CONFIGS / "qwen3-0.6b.json"))
    config = replace(sizes, description=family.describe(raw, sizes))
    assert set(used_by(config.arch)) == {"qk_norm", "sliding_window"}
    n = config.n_layers
    rows = plan(config, seq=1024)
    roles = {r.role for r in rows if r.kernel == "flash_attention"}
    assert roles == {f"attention (global, {n // 4} layers)", f"attention (sliding window 512, {n - n // 4} layers)"}
    assert any(r.kernel == "rmsnorm" and r.shape.get("N") == config.head_dim and "q/k" in r.role for r in rows)
    assert "window 512" in str(dispatch_plan(config, seq=1024))
    assert sliding_window.attention_kwargs(config.arch, 0) == {"window": 512}
    assert sliding_window.attention_kwargs(config.arch, 3) == {}


def test_a_family_without_the_window_feature_refuses_a_window_through_the_feature():
    raw = {**load_raw_config(CONFIGS / "llama-3.2-1b.json"), "layer_types": ["sliding_attention"] * 16}
    reasons = assess(raw).reasons
    assert any("sliding-window attention" in r and "the llama adapter describes full causal attention only" in r
               for r in reasons), reasons
