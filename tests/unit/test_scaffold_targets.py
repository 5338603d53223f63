"""The scaffolded model directory has the targets mlir-air's model Makefiles have (issue #25 item 2b): `chat`
(llama32_1b/Makefile:87-90@e972f29), `profile-prefill` / `bench` at the padded prefill length CTX
(llama32_1b_q4nx/Makefile:38-40,173-176 and qwen25_3b_q4/Makefile:236-244@e972f29), the `run_npu2_*.lit` files
of llama32_1b's directory (@e972f29; run_npu2_prefill_sweep.lit@f4ffd43), and an ARCHITECTURE.md whose stated
switches are the ones it was given and whose ELF lists follow them."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from npu_kernels.mlir_air.checkout import MARKER, ROOT
from npu_kernels.mlir_air.model_profile import parse_model_profile
from npu_kernels.mlir_air.scaffold import scaffold, stated_switches
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.perf.dispatch import dispatch_plan
from npu_kernels.perf.figures import npu2_figures
from npu_kernels.perf.predict import predict

OFF = {"fusion": False, "weight_residency": False, "intermediate_bos": False, "seq_first": False}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_llama) -> Path:
    twin = write_twin(tmp_path_factory.mktemp("scaffold") / "mlir-air")
    out = scaffold(twin, "tiny", str(tiny_llama), resolve(load_raw_config(tiny_llama)), stand_in="emulated")
    return Path(out["dir"])


def _make(model_dir: Path, tiny_llama, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(model_dir), *args, f"PYTHON={sys.executable}", f"NPU_LEDGER={ROOT}",
                           f"NPU_LEDGER_MODEL={tiny_llama}"], capture_output=True, text=True, timeout=300, input=stdin)


def test_the_makefile_has_mlir_airs_model_targets(model_dir):
    make = (model_dir / "Makefile").read_text()
    for target in ("compile", "run", "profile", "chat", "profile-prefill", "bench", "verify", "verify-full",
                   "diagnosis", "clean"):
        assert re.search(rf"^{re.escape(target)}:", make, re.M), target
    assert "CTX ?=" in make and "--prefill-only --seq-len $(CTX)" in make


def test_profile_prefill_prints_the_ttft_at_ctx_in_the_format_sweep_prefill_reads(model_dir, tiny_llama):
    config = resolve(load_raw_config(tiny_llama))
    got = {}
    for ctx in (512, 2048):
        done = _make(model_dir, tiny_llama, "profile-prefill", f"CTX={ctx}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"prefill kernels (seq_len={ctx})" in done.stdout  # sweep_prefill.py's guard of the built length
        p = parse_model_profile(done.stdout)
        assert p.ttft_format == "ttft" and p.context_len == ctx
        # the stand-in's figure is the NPU2 model's at that length (printed to 4 decimals of a second)
        assert p.ttft_ms == pytest.approx(predict(config, seq=ctx, switches=OFF, ctx=128).ttft_s * 1e3, abs=0.06)
        got[ctx] = p.ttft_ms
    assert got[512] < got[2048]  # a length axis, not one figure
    bench = _make(model_dir, tiny_llama, "bench", "CTX=512")
    assert bench.returncode == 0 and parse_model_profile(bench.stdout).ttft_ms == got[512]


def test_chat_answers_each_prompt_read_from_stdin(model_dir, tiny_llama):
    done = _make(model_dir, tiny_llama, "chat", "N_TOKENS=3", stdin="hello\n\nthe capital of France is\n")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("Chat") and len(lines) == 3  # the banner and one reply per non-blank prompt


def test_the_lit_files_follow_mlir_airs_form(model_dir):
    for kind, check in (("compile", "Compilation passed."), ("verify", "[verify] PASS"),
                        ("profile", '"model": "tiny"'), ("prefill_sweep", '"axis": "prefill_len"')):
        text = (model_dir / f"run_npu2_{kind}.lit").read_text()
        lines = text.splitlines()
        assert all(ln.startswith("//") for ln in lines)
        assert "// REQUIRES: npu_ledger_stand_in" in lines  # never run by mlir-air's lit config
        runs = [ln[len("// RUN: "):] for ln in lines if ln.startswith("// RUN: ")]
        assert runs[:3] == [f"mkdir -p test_peano_{kind}", f"cd test_peano_{kind}", "make -f %S/Makefile clean"]
        assert f"// CHECK: {check}" in lines
    profile = (model_dir / "run_npu2_profile.lit").read_text()
    assert "%PYTHON %S/../bench/extract_perf.py profile.txt --model tiny > tiny.perf.json" in profile
    assert "--makefile %S/Makefile" in (model_dir / "run_npu2_prefill_sweep.lit").read_text()
    compiled = _make_compile(model_dir)
    assert "Compilation passed." in compiled  # what run_npu2_compile.lit checks, printed by the stand-in


def _make_compile(model_dir: Path) -> str:
    done = subprocess.run(["make", "-s", "-C", str(model_dir), "compile", f"PYTHON={sys.executable}",
                           f"NPU_LEDGER={ROOT}"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "NPU_LEDGER_MODEL": "unused"})
    return done.stdout + done.stderr


@pytest.mark.parametrize("switches", [{}, {"fusion": True, "decode:seq_first": True},
                                      {"fusion": True, "weight_residency": True, "intermediate_bos": True,
                                       "seq_first": True, "decode:fusion": True}])
def test_architecture_states_the_switches_it_was_given_and_lays_the_elfs_out_under_them(tmp_path, tiny_llama,
                                                                                        switches):
    checkout = write_twin(tmp_path / "mlir-air")
    (checkout / MARKER).unlink()  # a real checkout's shape: a hardware scaffold is refused on a twin
    config = resolve(load_raw_config(tiny_llama))
    d = Path(scaffold(checkout, "tiny", str(tiny_llama), config, switches=switches)["dir"])
    text = (d / "ARCHITECTURE.md").read_text()
    names = ("fusion", "weight_residency", "intermediate_bos", "seq_first")
    assert stated_switches(text) == {"prefill": {k: bool(switches.get(k)) for k in names},
                                     "decode": {k: bool(switches.get("decode:" + k)) for k in names}}
    elfs = lambda section: re.findall(r"^- `([^`]+)\.elf`", text.split(section, 1)[1].split("\n## ", 1)[0], re.M)
    pre = dispatch_plan(config, {k: bool(switches.get(k)) for k in names})
    assert elfs("## Prefill (per layer)") == [c.elf for c in pre.prefill_layer]
    dec = dispatch_plan(config, {k: bool(switches.get("decode:" + k)) for k in names})
    assert elfs("## Decode (per layer, per token)") == [c.elf for c in dec.decode_layer]


def test_make_profile_prints_what_the_mlir_air_backend_reads_through_the_nightlys_parser(model_dir, tiny_llama):
    """npu_kernels.backends.mlir_air takes Phases 4-6's figures from `make profile` through model_profile: the
    End-to-end lines (no LM head) where printed; on the stand-in they are the modelled NPU2 figures."""
    done = _make(model_dir, tiny_llama, "profile", "N_TOKENS=2")
    assert done.returncode == 0, done.stdout + done.stderr
    p = parse_model_profile(done.stdout)
    f = npu2_figures(resolve(load_raw_config(tiny_llama)), {})
    assert p.prefill_ms == pytest.approx(f["prefill_s"] * 1e3, abs=1e-4)
    assert p.ms_per_token == pytest.approx(f["ms_per_token"], abs=1e-4)
    assert (p.ttft_format, p.decode_format) == ("ttft", "e2e_token")  # the script's choice for this driver


def test_a_target_without_its_environment_says_in_one_line_what_is_missing(model_dir, tiny_llama):
    """Issue #40 item 2: `make verify` without NPU_LEDGER_MODEL ended in a Hugging Face network traceback; it says
    what to give instead. `make compile` needs no model and runs; an interpreter without npu-ledger is named too."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("NPU_LEDGER_MODEL", "PYTHONPATH")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    base = ["make", "-s", "-C", str(model_dir), f"NPU_LEDGER={ROOT}"]
    run = lambda *args: subprocess.run([*base, *args], capture_output=True, text=True, timeout=300, env=env)  # noqa: E731
    verify = run("verify", f"PYTHON={sys.executable}")
    assert verify.returncode != 0 and "Traceback" not in verify.stderr, verify.stderr
    assert "NPU_LEDGER_MODEL is not set" in verify.stderr and "NPU_LEDGER_MODEL=<the model folder>" in verify.stderr
    assert run("compile", f"PYTHON={sys.executable}").returncode == 0
    bare = subprocess.run(["make", "-s", "-C", str(model_dir), "run", f"PYTHON={sys.executable} -S",
                           f"NPU_LEDGER_MODEL={tiny_llama}"], capture_output=True, text=True, timeout=300, env=env)
    assert bare.returncode != 0 and "Traceback" not in bare.stderr and "npu-ledger is not importable" in bare.stderr
    assert (model_dir / ".gitignore").read_text().splitlines()[-1] == "reports/"  # sweep-prefill's record lands there
    assert "SWEEP_LENGTHS ?= 128,256,512\n" in (model_dir / "Makefile").read_text()  # the 512-context model's lengths


def test_the_architecture_page_follows_the_ledgers_switches_unless_the_engineer_changed_it(tmp_path, tiny_llama):
    """Issue #40 item 2: ARCHITECTURE.md said every switch was off after Phases 4-5 turned them on; it is re-rendered
    when the switches the ledger records change (handlers.scaffold_sync calls refresh_architecture after every
    recording command), and a page the engineer edited is left alone."""
    from npu_kernels.mlir_air.architecture_page import refresh_architecture

    twin = write_twin(tmp_path / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    page = Path(scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated", switches={})["dir"]) / "ARCHITECTURE.md"
    assert not any(stated_switches(page.read_text())["prefill"].values())
    now = {"fusion": True, "decode:weight_residency": True}
    assert refresh_architecture(twin, "tiny", config, now) == str(page)
    stated = stated_switches(page.read_text())
    assert stated["prefill"]["fusion"] and stated["decode"]["weight_residency"] and not stated["decode"]["fusion"]
    assert refresh_architecture(twin, "tiny", config, now) is None  # nothing changed: nothing written
    page.write_text(page.read_text() + "\nthe engineer's note\n")
    assert refresh_architecture(twin, "tiny", config, {}) is None and "the engineer's note" in page.read_text()


def test_a_short_convolution_model_gets_the_decode_gate_of_mlir_airs_lfm2_directory(model_dir, tmp_path, tiny_lfm2):
    """lfm2_1_2b_q4nx/Makefile's `decode-gate` (at ff1efdb0) for a model with ShortConv layers, none for the others;
    the stand-in's script runs npu-ledger's (npu_kernels.mlir_air.twin.decode_gate), the hardware skeleton says in
    one line that it is not written yet."""
    from npu_kernels.mlir_air.scaffold import _decode_gate

    assert "decode-gate" not in (model_dir / "Makefile").read_text() and not list(model_dir.glob("*_decode_gate.py"))
    twin = write_twin(tmp_path / "mlir-air")
    lf = Path(scaffold(twin, "lf", str(tiny_lfm2), resolve(load_raw_config(tiny_lfm2)), stand_in="emulated")["dir"])
    make = (lf / "Makefile").read_text()
    assert re.search(r"^decode-gate:\n\tcd \$\(srcdir\) && \$\(RUN_PY\) \$\(srcdir\)/lf_decode_gate\.py --seq "
                     r"--state-verbose \$\(DECODE_GATE_FLAGS\)$", make, re.M)
    assert "from npu_kernels.mlir_air.twin import decode_gate" in (lf / "lf_decode_gate.py").read_text()
    with pytest.raises(SystemExit, match="lf_decode_gate.py is the scaffold's skeleton, not written yet"):
        exec(compile(_decode_gate("lf", False), "lf_decode_gate.py", "exec"), {})
