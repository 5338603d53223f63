"""The architecture description (issue #36) re-expresses the four existing families without moving a bit: the
tiny models' emulated prefill / decode logits and the small configs' plans and NPU2 predictions hash as they did
on main's code path before it (tests/fixtures/family_digests_66301c1.json, written by tests.family_digests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npu_kernels.model.options import PipelineOptions
from tests.family_digests import logits_digest, plan_digest, predict_digest
from tests.small_configs import MODELS, model_config

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "family_digests_66301c1.json").read_text())


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_the_tiny_models_logits_are_bit_identical_to_mains(kind, request):
    folder = request.getfixturevalue(f"tiny_{kind}")
    assert logits_digest(folder) == RECORDED["logits"][kind]
    assert logits_digest(folder, PipelineOptions.optimised()) == RECORDED["logits"][kind + "+optimised"]


@pytest.mark.parametrize("spec", MODELS, ids=lambda s: "-".join(map(str, s)))
def test_the_small_configs_plans_and_predictions_are_those_of_main(spec):
    key = "-".join(map(str, spec))
    config = model_config(*spec)
    assert plan_digest(config) == RECORDED["plan"][key]
    assert predict_digest(config) == RECORDED["predict"][key]
