"""Per-model docs projected from a hand-built, realistic deployment history."""

from __future__ import annotations

import struct

import pytest

from registry.model_docs import project_model_docs
from registry.model_fold import DeploymentFold, current, fold_deployment
from registry.projections import project_all
from registry.synthetic import realistic_deployment, realistic_deployment_resolved, record

NAME = "smollm2_135m_instruct"
DOCS = f"llms/{NAME}/docs/development_progress"


@pytest.fixture(scope="module")
def blocked():
    return {k: v for k, v in project_model_docs(record(realistic_deployment(NAME)), NAME).items()}


@pytest.fixture(scope="module")
def finished():
    return {k: v for k, v in project_model_docs(record(realistic_deployment_resolved(NAME)), NAME).items()}


def text(files, rel):
    return files[rel].decode()


def test_every_doc_is_produced_under_the_models_directory(finished):
    assert sorted(finished) == sorted([
        f"llms/{NAME}/TODO.md", f"llms/{NAME}/docs/evaluation_report.md", f"llms/{NAME}/docs/perf_history.md",
        *([f"llms/{NAME}/docs/perf_history.png"] if f"llms/{NAME}/docs/perf_history.png" in finished else []),
        *(f"{DOCS}/{n}" for n in ("LESSONS.md", "phase1_kernels.md", "phase2_block.md", "phase3_full.md",
                                  "phase3_layer_cosine.png", "phase4_prefill.md", "phase5_decode.md",
                                  "phase6_finalize.md", "phase_timing.md", "progress.md")),
    ])


def test_todo_ticks_passed_phases_and_shows_the_failed_phase_with_its_triage(blocked):
    todo = text(blocked, f"llms/{NAME}/TODO.md")
    for phase in range(4):
        assert f"- [x] {phase}: " in todo
    assert "- [ ] 4: Prefill Optimization — ❌ failed (attempt 2, seq 64)" in todo
    assert "- [ ] 5: Decode Optimization — ⏳ pending" in todo
    assert "**Status**: needs human review" in todo
    blockers = todo.split("## Active blockers")[1].split("## Resolved config")[0]
    assert "BlockerRaised seq 66" in blockers and "phase 4 failed twice" in blockers
    # the latest triage of the failed phase, not the first one
    assert "| P4-SETUP | weight conversion inside the timed loop | convert weights in setup | 0.9 |" in blockers
    assert "P4-NOISE" not in blockers
    assert "| vocab_size | 49152 |" in todo and "| rope_theta | 100000 |" in todo


def test_a_resume_resolves_the_blocker_and_the_evaluation_is_reported(finished):
    todo = text(finished, f"llms/{NAME}/TODO.md")
    assert "## Active blockers\n\n(none)" in todo and "**Status**: deployed" in todo
    assert "Independently evaluated 2026-06-18: PASS-with-warnings" in todo
    report = text(finished, f"llms/{NAME}/docs/evaluation_report.md")
    assert "## Verdict: PASS-with-warnings" in report
    assert "| warning | 12 | — | flash attention below target tiles (justified) |" in report
    assert "| info | 27 |" in report
    assert "- **yes** — Hash chain intact" in report and "- **yes** — Re-measured sample agrees" in report
    assert "| token_gate.passed | 2 |" in report and "| prefill_s | 1.04 |" in report
    # a PASS-with-warnings leaves its warnings in TODO.md as follow-ups
    assert "## Follow-ups (evaluation PASS-with-warnings, EvaluationRecorded seq 82)" in todo
    assert "- [ ] seq 12 flash attention below target tiles (justified)" in todo
    assert f"ledger log --stream deployment:{NAME}" in report


def test_phase_timing_measures_each_attempt_from_when_its_work_began(finished):
    timing = text(finished, f"{DOCS}/phase_timing.md")
    # this synthetic ledger predates PhaseStarted.started_at: the start falls back to recorded_at, and says so
    assert ("| 0 | Build CPU Reference | 1 | 1781773560 (09:06:00Z) | 1781774280 (09:18:00Z) | 12.00 | 720.0 | "
            "passed (start not recorded) | 3, 7 |") in timing
    assert "| 4 | Prefill Optimization | 3 |" in timing  # three attempts listed
    assert "| 4: Prefill Optimization | 20.00 | — | — | 20.00 | 3 attempt(s), ✅ passed |" in timing
    assert "| Phase | wall_min | npu_compile_min | npu_runtime_s | dev_min | notes |" in timing


def test_phase_timing_starts_an_attempt_at_its_started_at():
    from dataclasses import replace

    recs = list(record(realistic_deployment_resolved(NAME)))
    first = next(i for i, r in enumerate(recs) if r.type == "PhaseStarted")
    start = recs[first]
    payload = {**start.payload, "started_at": "2026-06-18T08:36:00+00:00"}  # 30 min before it was recorded
    recs[first] = replace(start, payload=payload)
    timing = project_model_docs(recs, NAME)[f"{DOCS}/phase_timing.md"].decode()
    assert "| 0 | Build CPU Reference | 1 | 1781771760 (08:36:00Z) | 1781774280 (09:18:00Z) | 42.00 | 2520.0 | passed | 3, 7 |" in timing


def test_phase1_lists_kernel_rows_with_tiles_in_flight_and_the_triage_of_the_failed_run(blocked):
    p1 = text(blocked, f"{DOCS}/phase1_kernels.md")
    assert "8/8 kernel × shape × contract rows PASS" in p1
    assert "| gemm | M=2048,K=576,N=576 | bf16-out-high | Q/O proj | prefill | PASS | 9.4e-3 |" in p1
    assert "64/192/32/64" in p1 and "8/32 — heads-per-unroll 2 limits placement" in p1
    assert "| 16 | 2026-06-18 09:45:00Z | silu_mul | N=3145728 | bf16 | emulated | CPU emulator | FAIL |" in p1


def test_phase2_has_the_bisect_table(blocked):
    p2 = text(blocked, f"{DOCS}/phase2_block.md")
    assert "| 21 | 0 | emulated | 12 | 0.99810 | 0.99020 |" in p2
    assert "| 2 | gemm, flash_attention | 0.99990 | 0.99970 | — |" in p2


def test_phase3_has_the_token_gate_the_layer_table_and_a_png_chart(blocked):
    p3 = text(blocked, f"{DOCS}/phase3_full.md")
    assert "| What is the capital of France? | emulated | 32 | PASS | none | 32 |" in p3
    assert "| 1234 (#2) | 987 (#2) |" in p3
    assert "![per-layer cosine](phase3_layer_cosine.png)" in p3
    assert p3.count("\n| 0 | ") == 30  # one row per layer for prompt 0
    png = blocked[f"{DOCS}/phase3_layer_cosine.png"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (800, 400)
    assert b"Software" not in png and b"tIME" not in png


def test_optimisation_pages_show_outcomes_speedups_and_baselines(finished):
    p4 = text(finished, f"{DOCS}/phase4_prefill.md")
    assert "| 59 | weight residency | applied | 1.8400 | 1.2100 | 1.52× | PASS | weights converted once |" in p4
    assert "| 60 | fused qkv | reverted |" in p4
    assert "## Baseline" in p4 and "| 57 | 3 | emulated | CPU emulator | 1.8400 |" in p4
    p6 = text(finished, f"{DOCS}/phase6_finalize.md")
    assert "| TTFT (s) | 1.0500 |" in p6 and "| tokens/s | 16.1 |" in p6
    assert "| gemm | 150 | 0.61 |" in p6


def test_lessons_are_listed_with_phase_and_seq(finished):
    lessons = text(finished, f"{DOCS}/LESSONS.md")
    assert "- **Phase 4** (seq 67, 2026-06-18): Keep weight conversion outside the timed region." in lessons
    assert "Profile before optimising" in lessons


def test_docs_are_byte_identical_on_rebuild_and_never_contain_a_machine_path(finished):
    again = project_model_docs(record(realistic_deployment_resolved(NAME)), NAME)
    assert again == finished
    assert not any(b"/models/" in data for data in finished.values())
    assert "`HuggingFaceTB/SmolLM2-135M-Instruct`" in text(finished, f"llms/{NAME}/TODO.md")


def test_project_all_finds_every_deployment_and_keeps_them_apart():
    events = record(realistic_deployment("alpha") + realistic_deployment_resolved("beta"))
    files = project_all(events)
    assert "llms/alpha/TODO.md" in files and "llms/beta/TODO.md" in files
    assert "needs human review" in files["llms/alpha/TODO.md"].decode()
    assert "**Status**: deployed" in files["llms/beta/TODO.md"].decode()
    assert "alpha Q/O proj" in files["kernel_registry/supported_kernels.md"].decode()


def test_a_deployment_without_evidence_still_gets_every_page():
    files = project_model_docs([], "empty")
    assert "## Verdict: not evaluated yet" in files["llms/empty/docs/evaluation_report.md"].decode()
    assert "- [ ] 0: Build CPU Reference — ⏳ pending" in files["llms/empty/TODO.md"].decode()
    assert "llms/empty/docs/development_progress/phase3_layer_cosine.png" not in files


def test_the_evaluation_report_of_an_emulated_deployment_says_what_ran_never_on_npu2(finished):
    # issue 48 item 5: at dd99c44 every report was titled "... on NPU2", an emulated deployment's included
    title = text(finished, f"llms/{NAME}/docs/evaluation_report.md").split("\n# ", 1)[1].splitlines()[0]
    assert title == (f"Evaluation Report: {NAME} on the CPU emulator of NPU2 (executor emulated; times modelled, "
                     "not measured)")
    assert "on NPU2" not in title


def test_the_evaluation_report_title_names_a_twin_rehearsal_and_keeps_npu2_for_device_rows():
    from ledger import events as ev
    from registry.evaluation_page import render_evaluation
    from registry.model_fold import fold_deployment

    def title(executor, toolchain=None, device=None):
        row = ev.KernelVerified(kernel="gemv", shape={"M": 64, "K": 64}, contract="bf16-out", executor=executor,
                                verdict="PASS", rtol=1.6e-2, atol=1e-3, source="harness" if toolchain else "emulated",
                                provenance={"toolchain": toolchain or {}, "device": device})
        stream = "deployment:m"
        view = fold_deployment(record([(stream, ev.DeploymentRequested(model_path="/m", name="m", executor=executor)),
                                       (stream, row)]), "m")
        return render_evaluation(view).split("\n# ", 1)[1].splitlines()[0]

    assert title("emulated").startswith("Evaluation Report: m on the CPU emulator of NPU2")
    assert title("torch") == "Evaluation Report: m on the CPU (executor torch; NPU2 times modelled, not measured)"
    twin = title("mlir-air", {"standin": "npu-ledger twin", "mlir_air_commit": "e972f29"}, "npu2")
    assert "stand-in mlir-air checkout" in twin and "on NPU2" not in twin
    hardware = title("mlir-air", {"mlir_air_commit": "e972f29", "xrt_smi": "xrt-smi 2.19"}, "RyzenAI-npu4")
    assert hardware == "Evaluation Report: m on NPU2 through mlir-air"


def _interleaved(*streams: list) -> list:
    """The items of several deployments' histories taken in turn (their records interleave in the ledger)."""
    out, longest = [], max(len(s) for s in streams)
    for i in range(longest):
        out.extend(s[i] for s in streams if i < len(s))
    return out


def test_the_view_grown_record_by_record_is_the_view_folded_from_the_events_at_every_step():
    """A unit of work grows its deployment's view as it folds the stream (registry.model_fold.DeploymentFold); at every
    record it is the view a refresh from scratch folds from the ledger's events, so both render the same bytes."""
    events = record(_interleaved(realistic_deployment_resolved(NAME), realistic_deployment("other")))
    mine = [e for e in events if e.stream_id == f"deployment:{NAME}"]
    assert len(mine) > 60 and {"BlockerRaised", "DeploymentResumed", "FailureTriaged", "PhaseFailed"} <= {
        e.type for e in mine}
    grown = DeploymentFold(NAME)
    for i, rec in enumerate(mine):
        grown.add(rec)
        upto = [e for e in events if e.seq <= rec.seq]
        assert grown.view() == fold_deployment(upto, NAME), (i, rec.type)
    assert grown.view().toolchains and grown.view().blockers and grown.view().triage_by_subject
    assert project_model_docs(events, NAME, grown.view()) == project_model_docs(events, NAME)


def test_a_view_that_is_not_the_stream_the_events_hold_is_not_rendered_from():
    """A view overtaken by another writer's append (or ahead of the events, or of another stream) is not used: the
    docs are those of the stream the events hold."""
    events = record(realistic_deployment_resolved(NAME) + realistic_deployment("other"))
    mine = [e for e in events if e.stream_id == f"deployment:{NAME}"]
    behind = DeploymentFold(NAME)
    for rec in mine[:-1]:
        behind.add(rec)
    assert not current(behind.view(), events)
    assert project_model_docs(events, NAME, behind.view()) == project_model_docs(events, NAME)
    whole = fold_deployment(events, NAME)
    assert current(whole, events) and current(whole, events[:mine[-1].seq])  # the other stream's later records
    assert not current(whole, events[:mine[-1].seq - 1])  # the events are behind the view
    assert not current(fold_deployment(events, "other"), [e for e in events if e.stream_id != "deployment:other"])
    assert not current(DeploymentFold("never").view(), events)
    with pytest.raises(ValueError, match="does not follow"):
        behind.add(mine[0])
    with pytest.raises(ValueError, match="belongs to stream"):
        behind.add(next(e for e in events if e.stream_id == "deployment:other"))
