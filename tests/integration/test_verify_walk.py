"""`make verify-walk` in a scaffolded model directory: npu-ledger's teacher-forced walk on the runner the model's
verify adapter builds (mlir-air's adapter protocol), its report, and the reader that re-derives it.

The walk records the reference first and the adapter's runner second, then replays both to token_gate; its
numbers must be exactly those of token_gate run live on the same two runners."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npu_kernels.mlir_air.checkout import ROOT
from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.mlir_air.walk_report import parse_walk_output, report_path


@pytest.fixture(scope="module")
def walked(tmp_path_factory, tiny_llama):
    from npu_kernels.mlir_air.scaffold import scaffold
    from npu_kernels.mlir_air.twin import write_twin
    from npu_kernels.model.architecture import load_raw_config, resolve

    twin = write_twin(tmp_path_factory.mktemp("walk") / "mlir-air")
    out = scaffold(twin, "tiny", str(tiny_llama), resolve(load_raw_config(tiny_llama)), stand_in="emulated")
    # the scaffold names no path of this machine: the interpreter, npu-ledger checkout and model are make variables
    here = [f"PYTHON={sys.executable}", f"NPU_LEDGER={ROOT}", f"NPU_LEDGER_MODEL={tiny_llama}"]
    proc = subprocess.run(["make", "-C", out["dir"], "verify-walk", *here], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = report_path(proc.stdout, out["dir"])
    return twin, proc.stdout, path, json.loads(Path(path).read_text())


def test_the_walk_report_sits_beside_mlir_airs_and_holds_the_walk(walked):
    twin, text, path, report = walked
    assert Path(path).parent == twin / "programming_examples" / "llms" / "verify" / "reports"
    assert Path(path).name.startswith("teacher_forced_walk_")
    assert "-m npu_kernels.mlir_air.walk --runner=tiny.verify_adapter" in report["command"]
    prompts = [x for x in (twin / "programming_examples/llms/verify/prompts/instruct.txt").read_text().splitlines()
               if x and not x.startswith("#")][:2]  # the prompt file `make verify` reads, its --max-prompts 2
    assert report["prompts"] == prompts and report["config"]["n_steps"] == 32 and report["config"]["k"] == 5
    result = parse_walk_output(text, report)
    assert result.verdict == "PASS" and [p.prompt for p in result.prompts] == prompts
    for walk in report["walks"]:
        step = walk["steps"][3]
        assert set(step) == {"step", "token", "topk_ours", "topk_ref", "rank_ref_in_ours", "rank_ours_in_ref", "kl",
                             "logprob_ours", "logprob_ref"}
        assert len(walk["steps"]) == 32 and walk["ppl_ratio"] > 0 and walk["text_ours"]


def test_the_walk_is_token_gate_on_the_adapters_runner_and_the_reference(walked, tiny_llama):
    """The recorded-then-replayed walk equals token_gate run live on the same runners, number for number."""
    from npu_kernels.mlir_air.twin.stand_in import StandInRunner
    from npu_kernels.model.compare import token_gate
    from npu_kernels.model.hf_reference import HfRunner, load_tokenizer

    _, text, _, report = walked
    fields = parse_walk_output(text, report).prompts[0].fields
    tok = load_tokenizer(tiny_llama)
    ids = tok.encode(report["prompts"][0])
    live = token_gate(StandInRunner(str(tiny_llama)), HfRunner(tiny_llama), ids, tokenizer=tok)
    for key in ("tf_tokens", "tf_topk_ours", "tf_topk_ref", "tf_kl_per_step", "tf_logprob_ours", "tf_logprob_ref",
                "tf_ppl_ratio", "tf_passed", "tokens_ours", "tokens_ref", "text_ours", "text_ref"):
        assert fields[key] == getattr(live, key), key


@pytest.mark.parametrize("tamper, message", [
    (lambda r: r["walks"][0]["steps"][2].update(rank_ref_in_ours=4), "recorded ranks"),
    (lambda r: r["walks"][0]["steps"][2].update(token=r["walks"][0]["steps"][2]["topk_ref"][1]), "not the reference's argmax"),
    (lambda r: r["walks"][0]["steps"][5].update(logprob_ours=-40.0), "perplexity ratio"),
    (lambda r: r["walks"][0]["steps"][4].update(kl=5.0), "contradicts its own numbers"),
    (lambda r: r["walks"][1].update(tf_passed=False), "contradicts its own numbers"),
    (lambda r: r["walks"].append(copy.deepcopy(r["walks"][0])), "twice"),
    (lambda r: r["summary"].update(walk_failed=1), "is not the transcript's"),
])
def test_a_walk_report_that_contradicts_itself_is_refused(walked, tamper, message):
    _, text, _, report = walked
    bad = copy.deepcopy(report)
    tamper(bad)
    with pytest.raises(TranscriptError, match=message):
        parse_walk_output(text, bad)


def test_a_transcript_without_its_verdict_is_refused(walked):
    _, text, _, report = walked
    cut = "\n".join(line for line in text.splitlines() if not line.startswith("[walk] PASS"))
    with pytest.raises(TranscriptError, match="not one each"):
        parse_walk_output(cut, report)
    with pytest.raises(TranscriptError, match="says \\[walk\\] FAIL"):
        parse_walk_output(text.replace("[walk] PASS", "[walk] FAIL"), report)


def test_the_walk_refuses_a_runner_fed_other_tokens_than_it_recorded():
    import numpy as np

    from npu_kernels.mlir_air.walk import WalkError, Recorded, Replay

    rec = Recorded([1, 2, 3])
    rec.fed, rec.logits = [7], [np.zeros(10, np.float32), np.ones(10, np.float32)]
    side = Replay("ours", rec)
    side.prefill(np.array([1, 2, 3]))
    with pytest.raises(WalkError, match="not what was recorded"):
        side.decode_step(8, 3)
    with pytest.raises(WalkError, match="another prompt"):
        side.prefill(np.array([1, 2]))


# --- the mlir-air backend judges both reports -------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def _walk_files(model_dir: Path, prompts: list[str], tok, diverge_at: int | None) -> None:
    """A walk transcript + report as `make verify-walk` writes them, computed by the walk's own code on two
    recorded sides (identical logits, or ours swapping its top two at `diverge_at`)."""
    import numpy as np

    from npu_kernels.mlir_air.walk import SCHEMA, Recorded, Replay, walk_row
    from npu_kernels.model.compare import token_gate, topk_ids

    rng = np.random.default_rng(5)
    rows = []
    for i, text in enumerate(prompts):
        ids = tok.encode(text)
        ref, ours = Recorded(ids), Recorded(ids)
        for step in range(32):
            z = rng.standard_normal(len(tok)).astype(np.float32)
            o = z.copy()
            if step == diverge_at:
                a, b = topk_ids(z, 2)
                o[a], o[b] = z[b], z[a]
            ref.logits.append(z)
            ours.logits.append(o)
            if step < 31:
                ref.fed.append(topk_ids(z, 1)[0])
        ours.fed = list(ref.fed)
        g = token_gate(Replay("ours", ours), Replay("reference", ref), ids, prompt_index=i, prompt=text, tokenizer=tok)
        rows.append(walk_row(i, text, ids, g, tok))
    summary = {"walk_passed": len(rows), "walk_failed": 0}
    reports = model_dir.parent / "verify" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / "teacher_forced_walk_20260614-101600.json"
    path.write_text(json.dumps({"schema": SCHEMA, "command": "python -m npu_kernels.mlir_air.walk", "config": {},
                                "prompts": prompts, "walks": rows, "summary": summary}))
    (model_dir / "walk.txt").write_text(f"[walk] JSON: {path}\n[walk] Summary: {summary}\n[walk] PASS\n")


def _model_dir(tmp_path: Path, walk_target: bool) -> Path:
    d = tmp_path / "mlir-air" / "programming_examples" / "llms" / "m"
    (d / "reports").mkdir(parents=True)
    shutil.copyfile(FIXTURES / "verify_pass_report.json", d / "reports" / "verify_topk_token_20260614-101502.json")
    make = f"verify:\n\t@cat {FIXTURES / 'verify_pass.txt'}\n"
    if walk_target:
        make += "verify-walk:\n\t@cat walk.txt\n"
    (d / "Makefile").write_text(make)
    return d


def _gate(tmp_path, tiny_llama, monkeypatch):
    from npu_kernels.backends.mlir_air import MlirAirBackend
    from npu_kernels.model.architecture import load_raw_config, resolve
    from npu_kernels.model.prompts import Prompt

    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    backend = MlirAirBackend(tiny_llama, resolve(load_raw_config(tiny_llama)), "m", mlir_air_dir=str(tmp_path / "mlir-air"))
    text = json.loads((FIXTURES / "verify_pass_report.json").read_text())["prompts"][0]
    return backend.token_gate(Prompt(0, text, [], "mlir-air"), "phase3")


def test_the_backend_records_make_verify_and_the_walk_each_with_its_command_and_report(tmp_path, tiny_llama,
                                                                                      monkeypatch):
    from npu_kernels.model.hf_reference import load_tokenizer

    d = _model_dir(tmp_path, walk_target=True)
    prompts = json.loads((FIXTURES / "verify_pass_report.json").read_text())["prompts"]
    _walk_files(d, prompts, load_tokenizer(tiny_llama), diverge_at=None)
    g = _gate(tmp_path, tiny_llama, monkeypatch)
    assert g.passed and g.first_divergence_passed and g.tf_passed and g.tf_steps == 32 and g.divergence_step is None
    assert g.provenance["command"].startswith(f"make -C {d} verify NPU_LEDGER_SWITCHES=")
    assert g.provenance["walk"]["command"].startswith(f"make -C {d} verify-walk NPU_LEDGER_SWITCHES=")
    for prov in (g.provenance, g.provenance["walk"]):
        assert hashlib.sha256(Path(prov["report_path"]).read_bytes()).hexdigest() == prov["report_sha256"]
    assert g.text_ours and g.text_ours == g.text_ref and len(g.kl_per_step) == 32  # the greedy walk's KL


def test_a_walk_whose_first_divergence_is_not_make_verifys_fails_the_gate(tmp_path, tiny_llama, monkeypatch):
    from npu_kernels.model.hf_reference import load_tokenizer

    d = _model_dir(tmp_path, walk_target=True)
    prompts = json.loads((FIXTURES / "verify_pass_report.json").read_text())["prompts"]
    _walk_files(d, prompts, load_tokenizer(tiny_llama), diverge_at=3)
    g = _gate(tmp_path, tiny_llama, monkeypatch)
    assert g.tf_passed and g.first_divergence_passed and not g.passed  # each passes; they disagree
    assert "disagree on the first divergence (step None PASS vs step 3 PASS)" in g.reason


def test_a_model_directory_without_the_walk_target_says_how_to_get_it(tmp_path, tiny_llama, monkeypatch):
    from npu_kernels.backends.mlir_air import MlirAirBackendError

    _model_dir(tmp_path, walk_target=False)
    with pytest.raises(MlirAirBackendError, match="has no verify-walk target: `ledger scaffold` writes it"):
        _gate(tmp_path, tiny_llama, monkeypatch)
