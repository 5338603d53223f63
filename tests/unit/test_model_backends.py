"""The ModelBackend seam (npu_kernels.backends.model_backends): what a caller may know before building a backend, and
no operation that depends on another having been called first."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_kernels.backends.base import BackendUnavailable
from npu_kernels.backends.mlir_air import MlirAirBackend
from npu_kernels.backends.model_backends import backend_type, make_model_backend
from npu_kernels.mlir_air.transcript import TranscriptError
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.thresholds import BLOCK_REMEASURE_ATOL


def test_what_a_backend_can_do_is_readable_before_one_is_built():
    in_process, hw = backend_type("emulated"), backend_type("mlir-air")
    assert backend_type("torch") is in_process
    assert (in_process.hardware, in_process.can_bisect, in_process.block_remeasure_atol) == (
        False, True, BLOCK_REMEASURE_ATOL)
    assert (hw.hardware, hw.can_bisect, hw.block_remeasure_atol, hw.switches_keep_numbers) == (
        True, False, None, False)


def test_an_mlir_air_backend_without_its_model_directory_is_unavailable_naming_what_is_missing(tmp_path, tiny_llama,
                                                                                               monkeypatch):
    cfg = resolve(load_raw_config(tiny_llama))
    with pytest.raises(BackendUnavailable, match="needs the deployment's name"):
        make_model_backend("mlir-air", tiny_llama, cfg)
    monkeypatch.delenv("MLIR_AIR_DIR", raising=False)
    with pytest.raises(BackendUnavailable, match="needs MLIR_AIR_DIR"):
        make_model_backend("mlir-air", tiny_llama, cfg, deployment="m")
    monkeypatch.setenv("MLIR_AIR_DIR", str(tmp_path))
    with pytest.raises(BackendUnavailable, match="run `ledger scaffold m` first"):
        make_model_backend("mlir-air", tiny_llama, cfg, deployment="m")


def _checkout(tmp_path: Path) -> Path:
    """An mlir-air checkout with 8 verify prompts and a model directory whose `make verify` and `make verify-full`
    each fail saying which set they ran, so a token gate's error names the target it ran."""
    root = tmp_path / "mlir-air"
    prompts = root / "programming_examples" / "llms" / "verify" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "instruct.txt").write_text("".join(f"Name the number {i}.\n" for i in range(8)))
    model = root / "programming_examples" / "llms" / "m"
    model.mkdir(parents=True)
    (model / "Makefile").write_text("verify:\n\t@echo the default set; exit 1\n"
                                    "verify-full:\n\t@echo the full set; exit 1\n")
    return root


def _target(backend: MlirAirBackend, prompt) -> str:
    """The make target the token gate of `prompt` ran (`make -C DIR TARGET ...` in the error)."""
    with pytest.raises(TranscriptError) as e:
        backend.token_gate(prompt, "phase3")
    return str(e.value).split("`")[1].split()[3]


def test_a_token_gate_runs_its_own_prompt_sets_target_whichever_set_was_asked_for_last(tmp_path, tiny_llama,
                                                                                       monkeypatch):
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    root, cfg = _checkout(tmp_path), resolve(load_raw_config(tiny_llama))

    def backend() -> MlirAirBackend:
        return MlirAirBackend(tiny_llama, cfg, "m", mlir_air_dir=str(root))

    first = backend()
    full, short = first.prompts(True), first.prompts(False)  # the default set asked for last
    assert [p.full for p in full] == [True] * 8 and [p.full for p in short] == [False] * 2
    assert [p.text for p in short] == [p.text for p in full[:2]]
    assert _target(first, full[5]) == "verify-full" and _target(first, short[0]) == "verify"
    second = backend()
    second.prompts(False)
    second.prompts(True)  # the full set asked for last
    assert _target(second, short[0]) == "verify" and _target(second, full[0]) == "verify-full"
    assert _target(backend(), full[1]) == "verify-full"  # prompts never asked for on this backend
