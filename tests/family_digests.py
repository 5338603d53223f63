"""Digests of what each existing family computes, recorded once on main's code path (66301c1) before the
architecture description (issue #36) and compared after it: the emulated pipeline's prefill and decode logits
of the tiny models (tests.models), and the plan and NPU2 prediction of the small configs
(tests.small_configs). `python -m tests.family_digests OUT.json` writes them."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

PROMPT = [5, 17, 42, 99, 7, 250, 3, 11, 64, 128]
DECODE_STEPS = 3


def _sha(arr) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(arr, np.float32)).tobytes()).hexdigest()


def logits_digest(folder: Path, options=None) -> dict[str, str]:
    """sha256 of the emulated pipeline's prefill logits and of each decode step's logits."""
    from npu_kernels.model.architecture import load_raw_config, resolve
    from npu_kernels.model.options import PipelineOptions
    from npu_kernels.model.pipeline import NpuPipeline
    from npu_kernels.model.weights import load_weights
    from npu_kernels.numerics.executors.emulated import EmulatedExecutor

    config = resolve(load_raw_config(folder))
    pipe = NpuPipeline(load_weights(folder, config), config, EmulatedExecutor("npu2"), options or PipelineOptions())
    rec = pipe.prefill(PROMPT)
    out = {"prefill": _sha(rec.logits_at_pred), "layers": _sha(np.stack([l["ffn_out"] for l in rec.layer_intermediates]))}
    token = rec.top1_token
    for step in range(DECODE_STEPS):
        d = pipe.decode_step(token, len(PROMPT) + step)
        out[f"decode{step}"] = _sha(d.lm_head_logits)
        token = d.top1_token
    return out


def plan_digest(config) -> str:
    from npu_kernels.model.plan import plan

    rows = [r.to_json() for r in plan(config, "npu2")]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def predict_digest(config) -> str:
    from npu_kernels.perf.figures import npu2_figures

    figs = npu2_figures(config, {})
    return hashlib.sha256(json.dumps(figs, sort_keys=True, default=str).encode()).hexdigest()


def record(root: Path) -> dict:
    from npu_kernels.model.options import PipelineOptions
    from tests.models import KINDS, build_tiny_model
    from tests.small_configs import MODELS, model_config

    out: dict = {"logits": {}, "plan": {}, "predict": {}}
    for kind in KINDS:
        folder = build_tiny_model(kind, root / f"tiny-{kind}")
        out["logits"][kind] = logits_digest(folder)
        out["logits"][kind + "+optimised"] = logits_digest(folder, PipelineOptions.optimised())
    for spec in MODELS:
        key = "-".join(map(str, spec))
        cfg = model_config(*spec)
        out["plan"][key] = plan_digest(cfg)
        out["predict"][key] = predict_digest(cfg)
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(sys.argv[1]).write_text(json.dumps(record(Path(tmp)), indent=1, sort_keys=True) + "\n")
