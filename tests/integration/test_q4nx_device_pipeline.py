"""The on-device 4-bit style's two halves on the tiny Llama (issue #26): the in-process pipeline decodes with the
4-bit GEMV on the re-quantised codes (npu_kernels.model.pipeline_q4), and the HF reference prefills with the
dequantised bundle and decodes with decode.requant (npu_kernels.model.hf_reference), as the deployment does."""

from __future__ import annotations

import numpy as np
import pytest

from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.pipeline_q4 import Q4DevicePipeline
from npu_kernels.model.q4nx_bundle import write_bundle, write_reference_folder
from npu_kernels.model.q4nx_device import DECODE_FILE

TOKENS = [1, 17, 42, 5, 99, 23, 7, 64]


@pytest.fixture(scope="module")
def folders(tiny_llama, tmp_path_factory):
    """(config, the device style's reference folder, the host style's) from one bundle of the tiny Llama."""
    cfg = resolve(load_raw_config(tiny_llama))
    root = tmp_path_factory.mktemp("q4nx-device")
    write_bundle(tiny_llama, root / "model.q4nx", cfg)
    info = write_reference_folder(root / "model.q4nx", tiny_llama, root / "device", cfg, "device")
    assert info["style"] == "device" and len(info["decode_sha256"]) == 64 and (root / "device" / DECODE_FILE).is_file()
    write_reference_folder(root / "model.q4nx", tiny_llama, root / "host", cfg)
    assert not (root / "host" / DECODE_FILE).exists()
    return cfg, root / "device", root / "host"


def test_the_device_styles_decode_runs_the_4_bit_gemv_for_every_projection_and_the_lm_head(folders):
    cfg, device, host = folders
    backend = InProcessBackend(device, cfg, "emulated", weights="q4nx-device")
    assert isinstance(backend.pipeline, Q4DevicePipeline) and backend.weights == "q4nx-device"
    pipe = backend.pipeline
    pipe.prefill(TOKENS)
    pipe.k.timer.reset()
    step = pipe.decode_step(5, len(TOKENS))
    assert pipe.k.timer.calls.get("gemv_q4nx") == 7 * cfg.n_layers + 1 and not pipe.k.timer.calls.get("gemv")
    other = InProcessBackend(host, cfg, "emulated")
    assert type(other.pipeline) is not Q4DevicePipeline and other.weights == "bf16"
    other.pipeline.prefill(TOKENS)
    other.pipeline.k.timer.reset()
    theirs = other.pipeline.decode_step(5, len(TOKENS))
    assert other.pipeline.k.timer.calls.get("gemv") and not other.pipeline.k.timer.calls.get("gemv_q4nx")
    assert not np.array_equal(step.lm_head_logits, theirs.lm_head_logits)  # re-quantised head and projections


def test_the_reference_prefills_dequantised_and_decodes_with_the_requantised_weights(folders):
    _, device, host = folders
    d, h = HfRunner(device), HfRunner(host)
    first = h.prefill(TOKENS)
    assert np.array_equal(d.prefill(TOKENS).logits_at_pred, first.logits_at_pred)
    ours, theirs = d.decode_step(5, len(TOKENS)), h.decode_step(5, len(TOKENS))
    assert not np.array_equal(ours.lm_head_logits, theirs.lm_head_logits)
    assert np.array_equal(d.prefill(TOKENS).logits_at_pred, first.logits_at_pred)  # swapped back for the prefill
