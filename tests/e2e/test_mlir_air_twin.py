"""The hardware path rehearsed on the mlir-air twin: `ledger twin` -> `init --executor mlir-air` -> `scaffold
--stand-in emulated` -> `advance` takes the tiny Llama from Phase 0 to deployed, every phase's evidence coming
from make targets and report files (real make, real subprocesses, real flock).

Phase 1 (the kernels) runs on the twin. Phases 2-7 run with a schema-only verify runner
(tests/e2e/schema_only_verify.py) that writes only what mlir-air's report schema holds, as a real checkout's runner
does, so a gate that needs evidence mlir-air does not produce fails here. They run in a checkout without the twin's
marker, on a simulated NPU2 host, through a model directory scaffolded with `--stand-in emulated`: issue #45's second
laundering case (every figure stays a rehearsal); the first (a harness table pointing at the twin) has a test of its
own below. The stand-in's own runner (which adds the whole-tensor cosine to its per-layer rows) is taken to deployed
by tests/e2e/test_rehearsal.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from npu_kernels.mlir_air.toolchain_floor import TWIN_PEANO
from npu_kernels.mlir_air.scaffold import stated_switches
from tests.e2e import schema_only_verify
from tests.e2e.cli import in_process, ledger, ledger_json


@pytest.fixture(scope="session")
def through_phase1(tmp_path_factory, tiny_llama):
    """A twin, a scaffolded model directory and a deployment that passed Phase 1 (its workspace is copied by each
    test). Session-scoped: the tests using it run on one worker (tests/conftest.py GROUPED) but not always back to
    back, and a module fixture was built again for the second (75 s of one core)."""
    root = tmp_path_factory.mktemp("twin-e2e")
    twin, ws = root / "mlir-air", root / "ws"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLIR_AIR_DIR", str(twin))
        mp.setenv("LEDGER_NPU_LOCK", str(root / "npu.lock"))
        for args in (("twin", str(twin)), ("init", str(tiny_llama), "--name", "tiny", "--executor", "mlir-air"),
                     ("scaffold", "tiny", "--stand-in", "emulated"), ("advance", "tiny", "--until", "1")):
            proc = ledger(ws, *args, timeout=1500)
            assert proc.returncode == 0, proc.stdout + proc.stderr
    runner = twin / "programming_examples" / "llms" / "verify" / "verify_runner.py"
    return root, runner.read_text()


def _report_keys_are_mlir_airs(path: str) -> None:
    keys = schema_only_verify.schema_keys()
    report = json.loads(Path(path).read_text())
    assert set(report) == keys["report"] and set(report["config"]) <= keys["config"]
    for row in report["topk_checks"] or []:
        assert set(row) == keys["topk_row"]
    for row in report["per_layer"]:
        assert set(row) == keys["layer_row"]


@pytest.mark.slow
def test_the_tiny_llama_is_deployed_through_the_twins_commands_and_reports(through_phase1, tmp_path, tiny_llama,
                                                                           monkeypatch):
    root, _ = through_phase1
    twin = root / "mlir-air"
    ws = tmp_path / "ws"
    shutil.copytree(root / "ws", ws)
    # Issue #45 laundering case 2: Phases 2-7 in a checkout without the marker (whose runner writes only mlir-air's
    # report schema), on a host whose probes all say NPU2, through a model directory scaffolded with `--stand-in
    # emulated` (its stand_in.json): every figure must still be a rehearsal
    checkout = _real_looking_checkout(twin, tmp_path / "checkout")
    schema_only_verify.install(checkout)
    _meet_the_contract(checkout)
    _simulated_npu2_host(tmp_path, monkeypatch)
    monkeypatch.setenv("MLIR_AIR_DIR", str(checkout))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(root / "npu.lock"))
    assert ledger(ws, "scaffold", "tiny", "--stand-in", "emulated").returncode == 0
    assert (checkout / "programming_examples" / "llms" / "tiny" / "stand_in.json").is_file()
    proc = ledger(ws, "advance", "tiny", timeout=1500, fresh=True)  # a fresh interpreter imports the host's pyxrt
    assert proc.returncode == 0, proc.stdout + proc.stderr

    status = ledger_json(ws, "status", "tiny")
    assert status["phases_passed"] == list(range(8))
    assert status["status"] == "deployed" and status["evaluation"] == "PASS"
    events = ledger_json(ws, "log", "--stream", "deployment:tiny")
    def head(where: Path) -> str:
        return subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    commit = head(checkout)
    model_dir = checkout / "programming_examples" / "llms" / "tiny"

    kernels = [e["payload"] for e in events if e["type"] == "KernelVerified"]  # Phase 1 ran on the twin
    assert kernels and all(k["source"] == "harness" and str(twin) in k["provenance"]["command"] for k in kernels)
    assert all(k["provenance"]["toolchain"]["mlir_air_commit"] == head(twin) for k in kernels)
    # the Peano version the twin's toolchain.json records, in the key mlir-air's nightly uses (#38 item 4)
    assert {k["provenance"]["toolchain"]["llvm_aie_version"] for k in kernels} == {TWIN_PEANO}
    # the plan's contract on the hardware path: K=512 GEMMs on the low tier, K=1024 on the high tier
    gemm = {(k["shape"]["K"], k["contract"], k["method"], k["tier"]) for k in kernels if k["kernel"] == "gemm"}
    assert gemm == {(512, "bf16-out-low", "direct", "low"), (1024, "bf16-out-high", "drain", "high")}

    def from_make(prov: dict, target: str) -> None:
        assert prov["command"].startswith(f"make -C {model_dir} {target}"), prov["command"]
        assert prov["mlir_air_commit"] == commit and prov["stand_in"] is True
        if prov["report_path"]:  # the report file the run wrote, unchanged since
            assert hashlib.sha256(Path(prov["report_path"]).read_bytes()).hexdigest() == prov["report_sha256"]

    from npu_kernels.model.hf_reference import load_tokenizer

    tok = load_tokenizer(tiny_llama)
    gates = []
    for e in events:
        p = e["payload"]
        if e["type"] in ("BlockValidated", "LayerDiagnosed"):
            from_make(p["provenance"], "diagnosis")
            _report_keys_are_mlir_airs(p["provenance"]["report_path"])
        elif e["type"] == "TokenGateChecked":
            gates.append(p)
            from_make(p["provenance"], "verify")
            from_make(p["provenance"]["walk"], "verify-walk")  # the walk: its own target, command and report
            assert p["provenance"]["walk"]["report_path"].startswith(str(checkout / "programming_examples/llms/verify/reports"))
            assert p["tf_steps"] == p["n_tokens"] == 32 and p["tf_passed"] and p["passed"]
            assert p["text_ours"] and p["text_ours"] == tok.decode(p["tokens_ours"])  # our side's text, not ''
            _report_keys_are_mlir_airs(p["provenance"]["report_path"])
        elif e["type"] == "PerformanceMeasured":
            assert p["profile"]["source"] == "mlir-air-profile"
        elif e["type"] == "PhasePassed" and p["phase"] in (4, 5):  # the verdict says what kind of figure it judged
            assert p["summary"].split(" with ")[0].endswith("x, mlir-air-profile, standin-rehearsal)"), p["summary"]
    block = next(e["payload"] for e in events if e["type"] == "BlockValidated")
    assert block["provenance"]["cosine_source"] == "mean per-position cosine"  # mlir-air's schema holds no other
    # the gate's prompts are the checkout's prompt file, raw-encoded (not the chat template)
    prompt_file = (checkout / "programming_examples/llms/verify/prompts/instruct.txt").read_text().splitlines()
    phase3 = [g for g in gates if g["context"] == "phase3"]
    assert [g["prompt"] for g in phase3] == [x for x in prompt_file if x and not x.startswith("#")][:2]
    assert not [e for e in events if e["type"] == "PhaseFailed"]
    # Phase 6's device curve: both sweeps of the model directory, decode through sweep_decode_runtime.py (#38 item 3)
    curve = next(e["payload"]["curve"] for e in events if e["type"] == "PerformanceMeasured" and e["payload"]["phase"] == 6)
    assert curve["source"] == "mlir-air-sweep" and curve["decode"]["points"] and curve["prefill"]["points"]
    assert all(p["status"] == "ok" for p in curve["decode"]["points"]) and "failures" not in curve["decode"]
    tried = [e["payload"] for e in events if e["type"] == "OptimizationTried"]
    assert {t["phase"] for t in tried if t["outcome"] == "applied"} == {4, 5}
    # on hardware a switch is another program: every trial keeps its own `make verify` re-run
    assert all(t["gate_context"] == f"phase{t['phase']}:{t['optimisation']}" for t in tried)
    assert not [e for e in events if e["type"] == "TokenGateChecked" and e["payload"]["context"].endswith(":final")]
    # the evaluator re-ran the kernel sample through the harnesses and the token gate through make verify
    evaluation = next(e["payload"] for e in events if e["type"] == "EvaluationRecorded")
    assert evaluation["remeasured"]["kernel_sample"][1:] and all(r["agrees"] for r in evaluation["remeasured"]["kernel_sample"][1:])
    assert all(g["passed"] for g in evaluation["remeasured"]["token_gate"])
    # issue #40 item 2: the checkout holds only what an engineer commits (the scaffolded files; run outputs such as
    # reports/sweep_prefill.json are ignored), and ARCHITECTURE.md, written before Phases 4-5 switched anything on,
    # states the switches the ledger records now
    assert (model_dir / "reports" / "sweep_prefill.json").is_file()
    porcelain = [line for line in subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=all"],
                                                 capture_output=True, text=True, check=True).stdout.splitlines()
                 if not line.endswith("llms/verify/verify_runner.py")]  # this test installed its own runner above
    scaffolded = set(json.loads((model_dir / ".npu-ledger-scaffold.json").read_text())) | {".npu-ledger-scaffold.json"}
    assert sorted(line[3:] for line in porcelain) == sorted(f"programming_examples/llms/tiny/{f}" for f in scaffolded)
    recorded = {k: True for k, v in (events[0]["payload"].get("pipeline") or {}).items() if v is True}
    for t in tried:
        recorded[t["optimisation"]] = t["outcome"] == "applied"
    names = ("fusion", "weight_residency", "intermediate_bos", "seq_first")
    assert stated_switches((model_dir / "ARCHITECTURE.md").read_text()) == {
        "prefill": {k: bool(recorded.get(k)) for k in names}, "decode": {k: bool(recorded.get("decode:" + k)) for k in names}}
    _a_stand_in_model_directory_stays_a_rehearsal(ws, events)


def _a_stand_in_model_directory_stays_a_rehearsal(ws: Path, events: list) -> None:
    """Laundering case 2 (issue #45): the host said NPU2 in every probe, the checkout has no marker; the model
    directory's stand_in.json makes every Phase 2-7 figure a stand-in rehearsal, so nothing is calibrated or exported
    and no page shows an NPU2 measurement. (At dd99c44 the backend read only MLIR_AIR_DIR's marker: npu2-measured.)"""
    from npu_kernels.provenance import perf_row_provenance

    perf = [e["payload"] for e in events if e["type"] == "PerformanceMeasured" and e["payload"]["executor"] == "mlir-air"]
    assert perf
    for p in perf:
        facts = p["profile"].get("provenance") or p["profile"]["npu2"]["provenance"]
        assert facts["device"] == SIMULATED_DEVICE and facts["toolchain"]["aie_opt"]  # the host said NPU2
        assert p["provenance_class"] == perf_row_provenance(p) == "standin-rehearsal"
    calibrated = ledger(ws, "perf", "calibrate")
    assert calibrated.returncode != 0 and "npu2-measured" in calibrated.stderr.lower() + calibrated.stdout.lower()
    for series in ("history", "sweep", "prefill_sweep"):
        done = in_process(ws, "perf", "export-history", "--series", series)
        assert done.returncode == 0 and done.stdout == "", (series, done.stdout)
    pages = "".join(p.read_text() for p in (ws / "llms" / "tiny").rglob("*.md"))
    # no table cell or gate line says NPU2 measured (the pages' legend explains the label, so the text is not searched)
    assert "| measured NPU2 |" not in pages and "**measured on NPU2**" not in pages
    assert "stand-in rehearsal" in pages


def _toml_section(name: str, table: dict) -> str:
    """`table` as a TOML section (values: strings, numbers, booleans, lists of them; nested tables as sub-sections)."""
    scalars = [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in table.items() if not isinstance(v, dict)]
    nested = "".join(_toml_section(f"{name}.{json.dumps(k)}", v) for k, v in table.items() if isinstance(v, dict))
    return f"\n[{name}]\n" + "".join(line + "\n" for line in scalars) + nested


TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
NPU2_TOOLCHAIN = "mlir_air_commit=e972f2942,aie_opt=aie-opt 1.0,xrt_smi=xrt-smi 2.19,peano=clang version 22.0.0"


def test_a_rehearsal_and_a_hardware_transcript_share_a_workspace_and_only_the_hardware_row_is_verified(
        through_phase1, tmp_path, monkeypatch):
    """Issue #34: the twin's Phase 1 rows are stand-in rehearsals wherever they are shown, chosen or exported; a
    transcript recorded with its device and toolchain is the only NPU2 row; a rehearsal row that claims
    npu2-measured is the evaluator's finding and still not verified."""
    root, _ = through_phase1
    ws = tmp_path / "ws"
    shutil.copytree(root / "ws", ws)
    monkeypatch.setenv("MLIR_AIR_DIR", str(root / "mlir-air"))
    events = ledger_json(ws, "log", "--stream", "deployment:tiny")
    rows = [e["payload"] for e in events if e["type"] == "KernelVerified"]
    assert rows and all(r["provenance_class"] == "standin-rehearsal" for r in rows)  # the events name the stand-in
    assert all(r["provenance"]["toolchain"]["standin"] == "ledger twin" for r in rows)

    # the rehearsal alone: nothing verified, nothing in the JSON mlir-air's registry_lookup reads, no lookup answer
    assert ledger(ws, "registry", "build").returncode == 0
    index = (ws / "kernel_registry" / "supported_kernels.md").read_text()
    table = index.split("## Kernels", 1)[1].split("\n---\n", 1)[0]
    assert "✅" not in table and "**" not in table and "🎭 stand-in rehearsal, not NPU2" in table
    doc = json.loads((ws / "kernel_registry" / "details" / "GEMM_bf16_in_bf16_out.json").read_text())
    assert doc["shapes"] == [] and {e["provenance"] for e in doc["_not_measured_on_npu2"]} == {"standin-rehearsal"}
    assert ledger(ws, "registry", "lookup", "gemm", "2048", "1024", "512").returncode != 0

    # a transcript from an NPU2 machine, recorded with its device and toolchain
    transcript = tmp_path / "gemm_2048.txt"
    transcript.write_text((TRANSCRIPTS / "gemm_pass.txt").read_text())
    done = ledger_json(ws, "record", "harness", "tiny", "--kernel", "gemm", "--shape", "M=2048,K=2048,N=2048",
                       "--contract", "bf16-out-high", "--method", "fused-cast", "--file", str(transcript), "--device", "NPU Strix",
                       "--toolchain", NPU2_TOOLCHAIN)
    assert done["provenance_class"] == "npu2-measured"
    assert ledger(ws, "registry", "build").returncode == 0
    doc = json.loads((ws / "kernel_registry" / "details" / "GEMM_bf16_in_bf16_out.json").read_text())
    assert [(s["M"], s["K"], s["N"], s["best"]) for s in doc["shapes"]] == [(2048, 2048, 2048, {"high": "fused-cast"})]
    index = (ws / "kernel_registry" / "supported_kernels.md").read_text()
    kernels_table = index.split("## Kernels", 1)[1].split("\n---\n", 1)[0]
    verified = [line for line in kernels_table.splitlines() if "✅" in line]
    assert len(verified) == 1 and "GEMM (BF16 in, BF16 out)" in verified[0] and "**8516 GFLOP/s**" in verified[0]
    lookup = ledger_json(ws, "registry", "lookup", "gemm", "2048", "2048", "2048")
    assert lookup["method"] == "fused-cast" and lookup["gflops"] == pytest.approx(8516.269)
    assert ledger(ws, "registry", "lookup", "gemm", "2048", "1024", "512").returncode != 0

    # a rehearsal row that claims npu2-measured (appended with a valid chain): a finding, and still not verified
    from handlers.evaluator.audit import provenance_claim_problem
    from ledger import open_ledger
    from ledger.events import KernelVerified
    from registry.fold import fold_registry

    lg = open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}")
    forged = {**rows[-1], "provenance_class": "npu2-measured", "gflops": 9000.0}
    forged = {k: v for k, v in forged.items() if k in KernelVerified.model_fields}
    stream = "deployment:tiny"
    lg.append(stream, lg.stream_version(stream), [KernelVerified(**forged)])
    rec = lg.read_all()[-1]
    assert "claims npu2-measured but its recorded facts make it standin-rehearsal" in provenance_claim_problem(rec)
    row = next(r for p in fold_registry(lg.read_all()).pages for r in p.rows
               if any(m.seq == rec.seq for m in r.measurements))
    assert row.status == "rehearsal" and not row.best.on_hardware


# -- Issue #45 item 1: provenance follows what ran, on a host that looks like an NPU2 host --------------------------

SIMULATED_DEVICE = "NPU Strix (simulated)"


def _simulated_npu2_host(root: Path, monkeypatch) -> None:
    """aie-opt, air-opt and xrt-smi on PATH, and a pyxrt that names a device (a fresh interpreter finds it through
    PYTHONPATH; the commands that probe run with `fresh=True`): every probe the tool makes says NPU2."""
    tools, py = root / "npu2-host" / "bin", root / "npu2-host" / "py"
    tools.mkdir(parents=True, exist_ok=True)
    py.mkdir(parents=True, exist_ok=True)
    for tool, line in (("aie-opt", "aie-opt 1.0"), ("air-opt", "air-opt 1.0"), ("xrt-smi", "xrt-smi 2.19")):
        (tools / tool).write_text(f"#!/bin/sh\necho '{line}'\n")
        (tools / tool).chmod(0o755)
    (py / "pyxrt.py").write_text("class xrt_info_device:\n    name = 'name'\n\n\nclass device:\n"
                                 "    def __init__(self, index):\n        self.index = index\n\n"
                                 f"    def get_info(self, key):\n        return {SIMULATED_DEVICE!r}\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(x for x in (str(py), os.environ.get("PYTHONPATH")) if x))


def _real_looking_checkout(twin: Path, dest: Path) -> Path:
    """A checkout the tool cannot tell from a real one by its root: the twin's tree without its marker or model
    directories, a git repository of its own."""
    from npu_kernels.mlir_air.checkout import MARKER

    shutil.copytree(twin, dest, ignore=shutil.ignore_patterns(MARKER, ".git", "reports", "tiny", "build*"))
    _meet_the_contract(dest)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return dest


def _meet_the_contract(root: Path) -> None:
    """Write into `root` what mlir-air's contract reads (npu_kernels/mlir_air/contract.toml), in the form each check
    looks for: a twin is checked against npu-ledger's own files, a checkout against its own (no mlir-air file is
    copied; each line says only what the contract pins)."""
    from handlers.doctor import doctor_checks
    from npu_kernels.mlir_air.contract import check_checkout

    extra = doctor_checks()
    forms = {"contains": "# {}", "flags": '# "{}"', "fields": '# "{}"', "make_vars": "# $({})", "targets": "{}:",
             "table_headers": "| {} |"}
    for finding in check_checkout(root, extra):
        if not finding.fails:
            continue
        path = root / finding.check.file
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [forms[finding.check.kind].format(" | ".join(i) if isinstance(i, (tuple, list)) else i)
                 for i in finding.check.items]
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n" + "\n".join(lines) + "\n")
    assert not [f for f in check_checkout(root, extra) if f.fails]


def _with_facts_of_dd99c44(payload: dict) -> dict:
    """A harness row as dd99c44 recorded it: no `ran` facts, its class decided by MLIR_AIR_DIR's marker."""
    prov = {k: v for k, v in payload["provenance"].items() if k != "ran"}
    return {**payload, "provenance": prov, "provenance_class": "npu2-measured"}


@pytest.mark.slow
def test_a_harness_table_pointing_at_a_twin_is_a_rehearsal_on_an_npu2_looking_host(through_phase1, tmp_path,
                                                                                     tiny_llama, monkeypatch):
    """Laundering case 1: MLIR_AIR_DIR names a checkout without the marker, on a host whose probes all say NPU2,
    while the harness table (NPU_LEDGER_HARNESSES) runs every command in the twin. The rows are stand-in rehearsals
    (the commands' paths are inside the twin), never ✅ or best; a row whose `ran` facts are scrubbed and whose
    class is edited to npu2-measured is the evaluator's finding (it re-reads where the command ran)."""
    root, _ = through_phase1
    twin = root / "mlir-air"
    ws = tmp_path / "ws"
    shutil.copytree(root / "ws", ws)
    real = _real_looking_checkout(twin, tmp_path / "checkout")
    _simulated_npu2_host(tmp_path, monkeypatch)
    from npu_kernels.mlir_air.table import DEFAULT_TABLE

    from npu_kernels.numerics.kernels import harnesses

    # the whole table pointed at the twin: harnesses.toml's entries and the kernels' own (registered or staged; an
    # entry of the file wins over a module's, so every kernel's command here names the twin; a kernel whose harness
    # is declared Absent has none)
    extra = "".join(_toml_section(f"harness.{json.dumps(key)}", entry) for key, entry in harnesses().items())
    table = tmp_path / "harnesses.toml"
    table.write_text((DEFAULT_TABLE.read_text() + extra).replace("{mlir_air}", str(twin)))
    monkeypatch.setenv("MLIR_AIR_DIR", str(real))
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(table))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(root / "npu.lock"))
    assert ledger(ws, "init", str(tiny_llama), "--name", "hw", "--executor", "mlir-air").returncode == 0
    proc = ledger(ws, "advance", "hw", "--until", "1", timeout=1500, fresh=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    rows = [e["payload"] for e in ledger_json(ws, "log", "--stream", "deployment:hw") if e["type"] == "KernelVerified"]
    assert rows
    for r in rows:  # the host said NPU2 in every probe; only what ran makes the row a rehearsal
        assert r["provenance"]["device"] == SIMULATED_DEVICE and r["provenance"]["toolchain"]["aie_opt"]
        assert not r["provenance"]["toolchain"].get("standin") and str(twin) in r["provenance"]["command"]
        assert r["provenance_class"] == "standin-rehearsal", r["provenance"].get("ran")
        assert any("ledger twin" in hit["why"] for hit in r["provenance"]["ran"]["standin"])
    assert ledger(ws, "registry", "build").returncode == 0
    table_md = (ws / "kernel_registry" / "supported_kernels.md").read_text().split("## Kernels", 1)[1]
    assert "✅" not in table_md.split("\n---\n", 1)[0] and "**" not in table_md.split("\n---\n", 1)[0]
    doc = json.loads((ws / "kernel_registry" / "details" / "GEMM_bf16_in_bf16_out.json").read_text())
    assert doc["shapes"] == []

    from handlers.evaluator.audit import provenance_claim_problem, standin_on_disk
    from ledger import open_ledger
    from ledger.events import KernelVerified

    lg = open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}")
    stream = "deployment:hw"
    row = next(r for r in rows if r["verdict"] == "PASS")
    scrubbed = {**row, "provenance_class": "npu2-measured",
                "provenance": {**row["provenance"], "ran": {**row["provenance"]["ran"], "standin": []}}}
    old = _with_facts_of_dd99c44(row)
    for forged in (scrubbed, old):
        lg.append(stream, lg.stream_version(stream), [KernelVerified(**{k: v for k, v in forged.items()
                                                                         if k in KernelVerified.model_fields})])
    scrubbed_rec, old_rec = lg.read_all()[-2:]
    assert provenance_claim_problem(scrubbed_rec) is None  # its recorded facts were edited to agree with the claim
    assert "ran in a stand-in as this host's files show: inside a `ledger twin` checkout" in standin_on_disk(scrubbed_rec)
    # a row dd99c44 would have recorded here: a command, no `ran`: never NPU2 now, and the claim is a finding
    assert "claims npu2-measured but its recorded facts make it unattested" in provenance_claim_problem(old_rec)
