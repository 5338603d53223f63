"""The reader of `make decode-gate` (npu_kernels.mlir_air.decode_gate_report): the lines mlir-air's lfm2 decode gate
prints (lfm2_1_2b_q4nx_decode_gate.py at 11cad40a), re-derived before they are evidence; garbage, a truncated run and
a contradiction are one TranscriptError each, and on an mlir-air deployment one FAIL record saying why
(npu_kernels.backends.mlir_air.conv_state_check). The record's check (statemachine.checks.decode_gate_problem)
re-derives the verdict from its own figures."""

from __future__ import annotations

import math
import re

import pytest

from ledger.events import ConvStateChecked
from npu_kernels.mlir_air.decode_gate_report import parse_decode_gate
from npu_kernels.mlir_air.output import TranscriptError
from statemachine.checks import conv_state_problem

# a two-token --seq --state-verbose run of a model with short-convolution layers 0 and 2, in the script's lines
GOOD = """\
.: layers=3  short-convolution layers=0,2
tok    232: cos=0.997932  dev_top1=   225  ref_top1=   225  top1=y
          ShortConv state read-back: max rel_l2 0.0637
            per layer: L0:0.018  L2:0.064
tok     42: cos=0.999107  dev_top1=    37  ref_top1=    38  top1=n
          ShortConv state read-back: max rel_l2 0.0488
            per layer: L0:0.009  L2:0.049

min cosine 0.997932 over 2 tokens (gate >= 0.9)
state slots checked 6, max rel_l2 0.0637; 0 layer(s) adding more than 0.05 of drift per model layer (gate: 0)
HYBRID NUMERICS PASS
"""


def _event(**over) -> ConvStateChecked:
    return ConvStateChecked(**{"executor": "mlir-air", **parse_decode_gate(GOOD, 0).event_fields(), **over})


def test_a_passing_run_gives_its_figures_and_its_record_counts():
    r = parse_decode_gate(GOOD, 0)
    assert r.verdict == "PASS" and r.seq and r.state_slots == 6 and r.min_cosine == 0.997932
    assert [s.token for s in r.steps] == [232, 42] and [s.top1 for s in r.steps] == [True, False]
    assert r.conv_layers() == [{"layer": 0, "rel_l2": 0.018}, {"layer": 2, "rel_l2": 0.064}]
    fields = r.event_fields()
    assert fields["thresholds"] == {"logits_cosine": 0.9, "state_rel_per_layer": 0.05}
    assert fields["n_positions"] == 2 and not fields["top1_agrees"]
    assert conv_state_problem(_event()) is None


@pytest.mark.parametrize("text,why", [
    ("", "HYBRID NUMERICS"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'W'\n", "HYBRID NUMERICS"),
    ("\x00\x01 garbage \ufffd\nHYBRID NUMERICS PASS\n", "min cosine"),
    (GOOD.replace("HYBRID NUMERICS PASS", "HYBRID NUMERICS PASS\nHYBRID NUMERICS FAIL"), "2 verdict lines"),
    (GOOD.replace("over 2 tokens", "over 3 tokens"), "counts 3 tokens"),
    (GOOD.replace("min cosine 0.997932", "min cosine 0.999107"), "not the lowest"),
    (GOOD.replace("HYBRID NUMERICS PASS", "HYBRID NUMERICS FAIL"), "own figures give PASS"),
    (GOOD.replace("max rel_l2 0.0637;", "max rel_l2 0.0100;"), "largest read-back"),
    (GOOD.replace("0 layer(s) adding", "1 layer(s) adding"), "1 layer(s) over the drift bound"),
    (GOOD.replace("L2:0.049", "L2:0.249"), "no drift line names it"),
    (GOOD.replace("            per layer: L0:0.009  L2:0.049\n", "            per layer: L0:zero\n"), "unreadable"),
    (GOOD.replace("          ShortConv state read-back: max rel_l2 0.0488\n", ""), "no `ShortConv state read-back`"),
    (GOOD.replace("tok     42: cos=0.999107  dev_top1=    37  ref_top1=    38  top1=n\n",
                  "tok     42: ERT_CMD_STATE_TIMEOUT\n"), "did not complete"),
])
def test_garbage_a_truncated_run_and_contradictions_are_one_clear_error(text, why):
    with pytest.raises(TranscriptError, match=re.escape(why)):
        parse_decode_gate(text, 0)


def test_the_exit_status_must_agree_with_the_verdict():
    with pytest.raises(TranscriptError, match="exited with status 1"):
        parse_decode_gate(GOOD, 1)


def test_a_failing_run_is_read_and_its_drift_line_checked():
    bad = (GOOD.replace("L2:0.049", "L2:0.249").replace("max rel_l2 0.0488", "max rel_l2 0.2488")
           .replace("          ShortConv state read-back: max rel_l2 0.2488",
                    "          layer 2: state drift 0.0090 -> 0.2490 over 2 model layer(s) = 0.1200/layer (> 0.05)\n"
                    "          ShortConv state read-back: max rel_l2 0.2488")
           .replace("max rel_l2 0.0637;", "max rel_l2 0.2488;").replace("0 layer(s) adding", "1 layer(s) adding")
           .replace("HYBRID NUMERICS PASS", "HYBRID NUMERICS FAIL"))
    r = parse_decode_gate(bad, 1)
    assert r.verdict == "FAIL" and r.drift_layers == 1 and r.steps[1].drift[0]["increment"] == 0.12
    assert "did not pass" in conv_state_problem(_event(**r.event_fields()))


def test_the_record_is_re_derived_not_trusted():
    steps = _event().steps
    # a cosine under the gate's bound, a weakened bound, a drift the per-layer figures give, no --seq, another executor
    low = [{**steps[0], "cosine": 0.85}, steps[1]]
    assert "0.85 < 0.9" in conv_state_problem(_event(steps=low))
    assert "0.85 < 0.9" in conv_state_problem(_event(steps=low, thresholds={"logits_cosine": 0.5,
                                                                            "state_rel_per_layer": 0.05}))
    drifted = [steps[0], {**steps[1], "per_layer": [{"layer": 0, "rel_l2": 0.009}, {"layer": 2, "rel_l2": 0.4}]}]
    assert "layer 2's state drift" in conv_state_problem(_event(steps=drifted, thresholds={
        "logits_cosine": 0.9, "state_rel_per_layer": 1.0}))
    assert "no carried state" in conv_state_problem(_event(carried_state=False))
    assert "no carried state" in conv_state_problem(_event(state_slots=0))
    assert "executor" in conv_state_problem(_event(executor="emulated"))
    assert "scored no token" in conv_state_problem(_event(steps=[]))


def test_a_nan_cosine_is_never_a_pass():
    nan = (GOOD.replace("tok     42: cos=0.999107", "tok     42: UNUSABLE -- 0 of 384 logit words never written (poison), "
                        "3 NaN\ntok     42: cos=nan").replace("min cosine 0.997932", "min cosine nan")
           .replace("HYBRID NUMERICS PASS", "HYBRID NUMERICS FAIL"))
    r = parse_decode_gate(nan, 1)
    assert math.isnan(r.min_cosine) and r.steps[1].unusable.startswith("tok     42: UNUSABLE") and r.verdict == "FAIL"


def test_on_an_mlir_air_deployment_an_unreadable_decode_gate_is_a_fail_record_not_a_crash(tmp_path, monkeypatch):
    """`make decode-gate` that prints garbage: the backend's ConvStateChecked fields say FAIL with one line naming the
    command and what was wrong, with the run's provenance (a twin: standin-rehearsal); the check names it."""
    from npu_kernels.backends.mlir_air import MlirAirBackend
    from npu_kernels.mlir_air.twin import write_twin

    twin = write_twin(tmp_path / "mlir-air")
    lf = twin / "programming_examples" / "llms" / "lf"
    lf.mkdir()
    (lf / "Makefile").write_text("decode-gate:\n\t@echo 'tok 1000: cos=banana'\n\t@echo 'HYBRID NUMERICS PASS'\n")
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    fields = MlirAirBackend(tmp_path / "model", None, "lf", mlir_air_dir=str(twin)).conv_state_check()
    event = ConvStateChecked(**fields)
    assert not event.passed and event.method == "decode-gate" and event.provenance_class == "standin-rehearsal"
    assert event.problem.startswith(f"`make -C {lf} decode-gate") and "(exit status 0)" in event.problem
    assert "an unreadable token line 'tok 1000: cos=banana'" in event.problem and "\n" not in event.problem
    assert "did not pass: `make -C" in conv_state_problem(event)


def test_the_evaluator_re_judges_a_decode_gate_record_and_its_provenance_claim():
    """handlers.evaluator.audit: a PASS whose figures miss the gate, and a twin's run claiming npu2-measured, are
    findings of the record itself."""
    from handlers.evaluator.audit import check_conv_state, provenance_claim_problem
    from ledger.record import RecordedEvent

    twin_run = {"command": "make -C /ck/programming_examples/llms/lf decode-gate", "toolchain": {"standin": True},
                "device": None, "ran": {"cwd": "/ck", "standin": [{"path": "/ck", "why": "a twin"}]}}
    good = _event(provenance=twin_run, provenance_class="standin-rehearsal").to_payload()

    def rec(payload):
        return RecordedEvent(7, "deployment:lf", 1, "e", "ConvStateChecked", payload, "2026-12-04T00:00:00Z")

    assert check_conv_state(rec(good)) == [] and provenance_claim_problem(rec(good)) is None
    forged = {**good, "steps": [{**good["steps"][0], "cosine": 0.5}, good["steps"][1]]}
    assert check_conv_state(rec(forged)) == ["says PASS but token 232's logits cosine 0.5 < 0.9"]
    claimed = {**good, "provenance_class": "npu2-measured"}
    assert "claims npu2-measured but its recorded facts make it standin-rehearsal" in provenance_claim_problem(rec(claimed))
