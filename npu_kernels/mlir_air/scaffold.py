"""`ledger scaffold NAME [--stand-in emulated]`: the model directory of mlir-air's Phase 6 playbook.

Writes `programming_examples/llms/<name>/` inside MLIR_AIR_DIR the way deploy-new-llm/SKILL.md:133-147 and
phase-6-finalize-and-learn/SKILL.md:46-76 lay it out: Makefile (compile / run / profile / chat / verify /
verify-full / diagnosis / clean, the recipes of mlir-air's own model Makefiles, PE/llms/llama32_1b/Makefile:
73-129, calling `../verify/verify_runner.py --runner=<name>.verify_adapter`; profile-prefill / bench at the padded
prefill length CTX, as the later model Makefiles have them, llama32_1b_q4nx/Makefile:38-40,173-176 and
qwen25_3b_q4/Makefile:236-244 @e972f29), verify_adapter.py (the adapter protocol, verify_runner.py:265-338),
`<name>_inference.py`, README.md, ARCHITECTURE.md (the per-layer ELF sequence of
`npu_kernels.perf.dispatch.dispatch_plan` under the deployment's switches, and a `## Switches` table stating them,
`stated_switches` reads it back; npu_kernels.mlir_air.architecture_page), profile-prefill CTX=L / sweep-prefill and
profile-decode CONTEXTS=.. / sweep-decode (the targets and sweeps of mlir-air's llms/bench/sweep_prefill.py@57bbed0b,
sweep_decode_runtime.py@c0dabd80), `run_npu2_{compile,verify,profile,prefill_sweep}.lit` (lit tests in the form of
llama32_1b's run_npu2_*.lit @e972f29 and run_npu2_prefill_sweep.lit @f4ffd43), .gitignore.

A short-convolution model (LFM2) also gets `decode-gate` and `<name>_decode_gate.py`: the carried-state gate of
mlir-air's lfm2_1_2b_q4nx/Makefile (at ff1efdb0) and the lines of its lfm2_1_2b_q4nx_decode_gate.py (at 11cad40a),
read by npu_kernels.mlir_air.decode_gate_report. A deployment with a drafter also gets `dflash-exactness` and
`<name>_dflash.py`: the flags of qwen3_4b_q4nx's dflash_acceptance_device.py --exactness (@43e773e, run as its
README.md 3b "Run" shows @01c8da75), read by npu_kernels.mlir_air.dflash.

npu-ledger's own targets beside mlir-air's: `verify-walk` / `verify-walk-full` run npu-ledger's teacher-forced
walk (`python -m npu_kernels.mlir_air.walk`) on the runner the same adapter builds, against the same HF bf16
reference and prompt files as `make verify` / `make verify-full` (2 prompts / all), and write
`../verify/reports/teacher_forced_walk_<stamp>.json` beside mlir-air's report.

What it writes is committable as it stands: no path of this machine. PYTHON (default python3), NPU_LEDGER (an
npu-ledger checkout put on PYTHONPATH; empty: installed in $(PYTHON)'s env) and NPU_LEDGER_MODEL (the model
folder `MODEL=local` stands for) come from the make command line or the environment; the tool passes its own
interpreter, checkout and model folder on every make call (npu_kernels.backends.mlir_air).

The recipes are lock-free: npu-ledger holds the NPU lock (flock /tmp/mlir-air-npu.lock) around each make
call, and the playbook template's inner `flock -x -w 1800 /tmp/mlir-air-npu.lock` inside a recipe would wait
on the tool's own lock for 1800 s (phase-6-finalize-and-learn/SKILL.md:162-185 vs :194).

`--stand-in emulated`: the adapter and `<name>_inference.py` wrap npu-ledger's emulated pipeline
(`npu_kernels.mlir_air.twin.stand_in`), so mlir-air's verify runner judges the emulator on a CPU; the Makefile
exports NPU_LEDGER_SWITCHES / NPU_LEDGER_FAULTS so the tool switches optimisations itself. Without it the
adapter and inference files are skeletons for the engineer: the adapter puts its own directory on sys.path and
imports `<name>_inference` (mlir-air's verify runner puts only llms/ and llms/verify/ there and imports
`<name>.verify_adapter`, verify_runner.py:48-51, :186-193 @e972f29; its own adapters add their directory,
llama32_1b/verify_adapter.py:25-32). Without it on a twin, refused: a rehearsal never becomes a hardware
scaffold unasked. A directory is one kind: a stand-in (stand_in.json) is never rescaffolded as hardware, nor
the reverse.

Never overwrites a file the engineer changed: `.npu-ledger-scaffold.json` keeps the sha256 of every file
written; a file whose content differs from its recorded hash (or that the scaffold did not write) is kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from npu_kernels.mlir_air.checkout import is_twin
from npu_kernels.mlir_air.architecture_page import MANIFEST, SWITCH_TABLE, architecture_page, stated_switches
from npu_kernels.perf.figures import NPU2_PREFILL_SEQ, build_seq

__all__ = ["MANIFEST", "STAND_IN_FILE", "SWITCH_TABLE", "ScaffoldError", "scaffold", "scaffolded_kind", "stated_switches"]

SWEEP_DEFAULT = (128, 256, 512, 1024, 2048)  # the sweep's lengths up to the build length
# what the directory ignores: mlir-air's build artifacts (llama32_1b/.gitignore @e972f29) and every run output the
# targets write here (reports/: sweep-prefill's record), so a deployment leaves only what an engineer commits
STAND_IN_FILE = "stand_in.json"  # what makes a model directory a stand-in (npu_kernels.mlir_air.twin.stand_in.settings)
GITIGNORE = "build_peano/\n*kernel_cache/\nair_project/\n__pycache__/\n*.pyc\ntest_peano_*/\nreports/\n"


class ScaffoldError(ValueError):
    """Raised when a model directory cannot be written as asked (the name, the checkout, the kind); one line."""


def scaffolded_kind(model_dir: str | Path) -> str | None:
    """The kind of model directory a scaffold wrote there: stand-in (with stand_in.json), hardware (a manifest and
    no stand_in.json), or None (never scaffolded)."""
    d = Path(model_dir)
    if (d / STAND_IN_FILE).is_file():
        return "stand-in"
    return "hardware" if (d / MANIFEST).is_file() else None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _decode_gate_rule(name: str) -> tuple[str, str]:
    """A short-convolution model's `decode-gate` (its .PHONY name and its rule): mlir-air's lfm2_1_2b_q4nx/Makefile
    at ff1efdb0 runs `lfm2_1_2b_q4nx_decode_gate.py --lbuild $(LBUILD) --seq` from the model directory after packing
    its weights; here `<name>_decode_gate.py --seq --state-verbose` (the per-layer line lets a reader re-derive every
    layer's drift, npu_kernels.mlir_air.decode_gate_report), DECODE_GATE_FLAGS for more of the script's flags."""
    return " decode-gate", f"""
# the carried short-convolution state (lfm2_1_2b_q4nx/Makefile decode-gate@ff1efdb0): the tokens as one sequence,
# each step's logits and every ShortConv layer's read-back state, `HYBRID NUMERICS PASS` / `FAIL`
DECODE_GATE_FLAGS ?=
decode-gate:
\tcd $(srcdir) && $(RUN_PY) $(srcdir)/{name}_decode_gate.py --seq --state-verbose $(DECODE_GATE_FLAGS)
"""


def _dflash_rule(name: str) -> tuple[str, str]:
    """A deployment with a drafter's `dflash-exactness` (its .PHONY name and its rule). mlir-air has no make target for
    it: qwen3_4b_q4nx's README.md section "3b. DFlash end to end", "Run" (@01c8da75) runs `python
    dflash_acceptance_device.py --prompts prompts_gsm8k.json --n 8 --n-tokens 32 --exactness` from the model
    directory (flags of dflash_acceptance_device.py:55-90@43e773e); here `<name>_dflash.py` with the same flags and
    `--out` (the raw per-block lengths), read by npu_kernels.mlir_air.dflash. NPU_LEDGER_DRAFTER names the drafter
    folder as NPU_LEDGER_MODEL names the model's; npu-ledger passes the gate prompts' tokens in DFLASH_PROMPTS."""
    return " dflash-exactness", f"""
# speculative decoding (qwen3_4b_q4nx README.md 3b "Run"@01c8da75: dflash_acceptance_device.py --exactness): each prompt
# with the drafter and again without it, `exact for SAME/K` per prompt, the acceptance length +/- 1 s.e.
NPU_LEDGER_DRAFTER ?=
export NPU_LEDGER_DRAFTER
DFLASH_PROMPTS ?= prompts.json
DFLASH_N ?= 2
DFLASH_N_TOKENS ?= 32
DFLASH_BLOCK ?= 4
DFLASH_OUT ?= reports/dflash_raw.json
dflash-exactness:
\tcd $(srcdir) && mkdir -p $(dir $(DFLASH_OUT)) && $(RUN_PY) $(srcdir)/{name}_dflash.py --prompts $(DFLASH_PROMPTS) \\
\t\t--n $(DFLASH_N) --n-tokens $(DFLASH_N_TOKENS) --block $(DFLASH_BLOCK) --exactness --out $(DFLASH_OUT)
"""


def _makefile(name: str, stand_in: bool, build: int = NPU2_PREFILL_SEQ, conv: bool = False,
              drafter: bool = False) -> str:
    phony, gate = _decode_gate_rule(name) if conv else ("", "")
    if drafter:
        phony, gate = phony + _dflash_rule(name)[0], gate + _dflash_rule(name)[1]
    extra = ("# the stand-in's optimisation switches and test faults (comma-separated), exported to the scripts\n"
             "NPU_LEDGER_SWITCHES ?=\nNPU_LEDGER_FAULTS ?=\nexport NPU_LEDGER_SWITCHES NPU_LEDGER_FAULTS\n") if stand_in else ""
    inf = f"$(srcdir)/{name}_inference.py"
    sweep = ",".join(str(x) for x in sorted({x for x in SWEEP_DEFAULT if x <= build} | {build}))
    return f"""# {name}: mlir-air model directory (npu-ledger scaffold; recipes as PE/llms/llama32_1b/Makefile:73-129).
# No recipe takes the NPU lock: run targets under `flock -x -w 1800 /tmp/mlir-air-npu.lock make <target>`.
# Nothing here names a path of one machine; three variables come from the command line or the environment
# (npu-ledger passes all three on every make call it runs):
#   PYTHON            the interpreter with the model's dependencies (default python3)
#   NPU_LEDGER        an npu-ledger checkout to put on PYTHONPATH (empty: npu-ledger is installed in $(PYTHON))
#   NPU_LEDGER_MODEL  the model folder (or Hugging Face id) MODEL=local stands for
srcdir := $(shell dirname $(realpath $(firstword $(MAKEFILE_LIST))))
PYTHON ?= python3
NPU_LEDGER ?=
NPU_LEDGER_MODEL ?=
export NPU_LEDGER_MODEL
BUILD_DIR ?= build_peano
N_TOKENS ?= 100
PROMPT ?= What is the capital of France?
MODEL ?= local
# the padded prefill length of profile-prefill / bench (llama32_1b_q4nx/Makefile:38-40@e972f29: CTX, no fixed
# seq_len); sweep_prefill.py passes CTX=<length> and the engine's length in LLM_SEQ_LEN (run_npu2_prefill_sweep.lit)
CTX ?= $(or $(LLM_SEQ_LEN),{build})
VERIFY_RUNNER = $(srcdir)/../verify/verify_runner.py
RUNNER_ADAPTER = {name}.verify_adapter
RUN_PY = $(if $(NPU_LEDGER),PYTHONPATH=$(NPU_LEDGER)$${{PYTHONPATH:+:$$PYTHONPATH}}) $(PYTHON)
# npu-ledger's teacher-forced walk (verify-walk), imported from NPU_LEDGER
WALK = $(RUN_PY) -m npu_kernels.mlir_air.walk --runner=$(RUNNER_ADAPTER) --llms-dir $(srcdir)/.. --model $(MODEL)
{extra}
# sweep-prefill: mlir-air's bench/sweep_prefill.py@a32bef3 over SWEEP_LENGTHS with this Makefile (it runs
# `make -f Makefile profile-prefill CTX=<L>` per length), its record in SWEEP_OUT; the lengths stop at the model's
# build length {build} (2048, cut to its context window); run outputs go under reports/, which .gitignore ignores
SWEEP_LENGTHS ?= {sweep}
SWEEP_OUT ?= $(srcdir)/reports/sweep_prefill.json
# sweep-decode: bench/sweep_decode_runtime.py@c0dabd80 (ONE `make profile-decode CONTEXTS=c1,c2,...`), record in
# SWEEP_DECODE_OUT; SWEEP_EXPECT_FAIL / SWEEP_DECODE_EXPECT_FAIL: what each sweep's --expect-fail is given
CONTEXTS ?= 1024
SWEEP_CONTEXTS ?= 1024,2048,4096
SWEEP_DECODE_OUT ?= $(srcdir)/reports/sweep_decode.json
SWEEP_EXPECT_FAIL ?=
SWEEP_DECODE_EXPECT_FAIL ?=
.PHONY: help compile run profile chat profile-prefill profile-decode bench sweep-prefill sweep-decode all verify verify-full verify-walk verify-walk-full diagnosis{phony} clean
help:
\t@echo "targets: compile run profile chat profile-prefill profile-decode bench sweep-prefill sweep-decode verify verify-full verify-walk verify-walk-full diagnosis{phony} clean"
\t@echo "options: PROMPT, N_TOKENS, MODEL, CTX (profile-prefill / bench: padded prefill length, default {build}), CONTEXTS (profile-decode), SWEEP_LENGTHS, SWEEP_CONTEXTS"

compile:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --compile-only

run:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --run-only --n-tokens $(N_TOKENS) --prompt "$(PROMPT)" --model $(MODEL)

profile:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --run-only --n-tokens $(N_TOKENS) --prompt "$(PROMPT)" --model $(MODEL) --profile

# llama32_1b/Makefile:87-90@e972f29: prepare the runtime once, then one reply per prompt
chat:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --run-only --interactive --n-tokens $(N_TOKENS) --model $(MODEL)

# warm prefill TTFT at the padded length CTX (llama32_1b_q4nx/Makefile:173-176@e972f29); `bench` is the same
# target under the name qwen25_3b_q4/Makefile:236-244@e972f29 gives it (extract_perf.py parses either's output)
profile-prefill:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --run-only --prefill-only --seq-len $(CTX) --model $(MODEL)

bench: profile-prefill

sweep-prefill:
\t@mkdir -p $(dir $(SWEEP_OUT))
\t$(PYTHON) $(srcdir)/../bench/sweep_prefill.py --model-name {name} --makefile $(srcdir)/Makefile --lengths $(SWEEP_LENGTHS) --expect-fail=$(SWEEP_EXPECT_FAIL) --out $(SWEEP_OUT)

# decode step time per context, one process (`[bench] decode ctx=C median ..`: sweep_decode_runtime.py's POINT_RE)
profile-decode:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) {inf} --run-only --decode-contexts $(CONTEXTS) --model $(MODEL)

sweep-decode:
\t@mkdir -p $(dir $(SWEEP_DECODE_OUT))
\t$(PYTHON) $(srcdir)/../bench/sweep_decode_runtime.py --model-name {name} --makefile $(srcdir)/Makefile --contexts $(SWEEP_CONTEXTS) --expect-fail=$(SWEEP_DECODE_EXPECT_FAIL) --out $(SWEEP_DECODE_OUT)

all: compile profile

verify:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) $(VERIFY_RUNNER) --runner=$(RUNNER_ADAPTER) --prompts topk_token --model $(MODEL) --max-prompts 2

verify-full:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) $(VERIFY_RUNNER) --runner=$(RUNNER_ADAPTER) --prompts topk_token --model $(MODEL)

verify-walk:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(WALK) --max-prompts 2

verify-walk-full:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(WALK)

diagnosis:
\t@mkdir -p $(BUILD_DIR)
\tcd $(BUILD_DIR) && $(RUN_PY) $(VERIFY_RUNNER) --runner=$(RUNNER_ADAPTER) --prompts single --prompt "$(PROMPT)" --model $(MODEL)
{gate}
clean:
\trm -rf $(srcdir)/$(BUILD_DIR) $(srcdir)/*kernel_cache $(srcdir)/air_project $(srcdir)/reports $(srcdir)/../verify/reports
"""


# npu-ledger is imported from PYTHONPATH (the Makefile's NPU_LEDGER) or from $(PYTHON)'s environment, never from
# a path written here; where it is neither, the script says so in one line instead of a traceback
_PATH = "import os, sys\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
def _twin_import(module: str) -> str:
    """A stand-in script's import of its twin module, with the one line a missing npu-ledger gets."""
    return (f"try:\n    from npu_kernels.mlir_air.twin import {module}\nexcept ImportError:\n"
            "    sys.exit(\"npu-ledger is not importable: give NPU_LEDGER=<an npu-ledger checkout> or "
            "PYTHON=<an interpreter with npu-ledger installed> on the make command line\")\n")


def _twin_main(module: str) -> str:
    """A stand-in script's `__main__`: the twin module's main on this model directory."""
    return f"\nif __name__ == \"__main__\":\n    sys.exit({module}.main([\"--model-dir\", HERE, *sys.argv[1:]]))\n"


_STAND_IN_IMPORT = _twin_import("stand_in")


def _model_ref(model_path: str) -> str:
    """What a written file may say about the model: a Hugging Face id or relative path as given, else the
    folder's name (an absolute path is this machine's; NPU_LEDGER_MODEL gives it at run time)."""
    return Path(model_path).name if Path(model_path).is_absolute() else model_path


def _adapter(name: str, model_path: str, stand_in: bool) -> str:
    if stand_in:
        return f'''"""{name}: mlir-air verify adapter (verify_runner.py:265-338) over npu-ledger's emulated pipeline (stand-in)."""
{_PATH}{_STAND_IN_IMPORT}
MODEL_CHOICES = {{"local": stand_in.settings(HERE)["model_path"]}}  # $NPU_LEDGER_MODEL, else stand_in.json
DEFAULT_MODEL = "local"


def resolve_model(choice):
    return MODEL_CHOICES.get(choice, choice)


def hf_reference(model_name):
    return model_name


def build_config():
    return stand_in.build_config(MODEL_CHOICES["local"])


def build_runner(model_name=None, config=None, max_seq=2048, tokenizer=None, npu_attn=True, lite_mode=True):
    return stand_in.build_runner(resolve_model(model_name or DEFAULT_MODEL))


def tokenizer(model_name):  # npu-ledger's walk only (not mlir-air's protocol): the stand-in scripts' tokenizer
    return stand_in.stand_in_tokenizer(resolve_model(model_name))
'''
    return f'''"""{name}: mlir-air verify adapter (verify_runner.py:265-338) over {name}_inference.py (the engineer's)."""
import os
import sys

import numpy as np

# mlir-air's verify runner imports this file as `{name}.verify_adapter` with llms/ and llms/verify/ on sys.path
# (PE/llms/verify/verify_runner.py:48-51, :186-193 @e972f29), not this directory: an adapter puts it there itself
# before importing its inference module, as PE/llms/llama32_1b/verify_adapter.py:25-32 @e972f29 does
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE in sys.path:
    sys.path.remove(HERE)
sys.path.insert(0, HERE)

import {name}_inference as inference  # noqa: E402  the engineer's: build_config, setup, run_npu_prefill, run_npu_decode_step

MODEL_CHOICES = {{"local": os.environ.get("NPU_LEDGER_MODEL") or {_model_ref(model_path)!r}}}
DEFAULT_MODEL = "local"


def resolve_model(choice):
    return MODEL_CHOICES.get(choice, choice)


def hf_reference(model_name):
    return model_name


def build_config():
    return inference.build_config()  # the engineer's config object (n_layers, emb_dim, ...)


class NpuRunner:
    name = "npu_bf16"

    def __init__(self, config, max_seq, lite_mode):
        self.state = inference.setup(config, max_seq=max_seq)
        self.lite = lite_mode

    def prefill(self, prompt_tokens):
        return inference.run_npu_prefill(self.state, np.asarray(prompt_tokens), lite=self.lite)

    def decode_step(self, input_token, current_pos):
        return inference.run_npu_decode_step(self.state, int(input_token), int(current_pos))


def build_runner(model_name=None, config=None, max_seq=2048, tokenizer=None, npu_attn=True, lite_mode=True):
    return NpuRunner(config or build_config(), max_seq, lite_mode)
'''


def _decode_gate(name: str, stand_in: bool) -> str:
    """`<name>_decode_gate.py`: the stand-in's (npu_kernels.mlir_air.twin.decode_gate), or the engineer's skeleton."""
    if stand_in:
        return (f'"""{name}: make decode-gate (npu-ledger stand-in: the emulated pipeline against HF transformers, '
                'in the lines of mlir-air\'s lfm2_1_2b_q4nx_decode_gate.py)."""\n' + _PATH +
                _twin_import("decode_gate") + _twin_main("decode_gate"))
    return (f'"""{name}: the decode gate of the carried short-convolution state (the engineer writes it): the tokens '
            "of --tokens as one\nsequence (--seq), printing the lines of mlir-air's "
            "lfm2_1_2b_q4nx/lfm2_1_2b_q4nx_decode_gate.py (11cad40a) that\nnpu_kernels/mlir_air/decode_gate_report.py "
            'lists, --state-verbose\'s per-layer line included."""\n'
            f"raise SystemExit('{name}_decode_gate.py is the scaffold\\'s skeleton, not written yet: its docstring "
            "says what make decode-gate prints')\n")


def _dflash(name: str, stand_in: bool) -> str:
    """`<name>_dflash.py`: the stand-in's (npu_kernels.mlir_air.twin.dflash), or the engineer's skeleton."""
    if stand_in:
        return (f'"""{name}: make dflash-exactness (npu-ledger stand-in: the emulated speculative loop, in the lines of '
                'mlir-air\'s qwen3_4b_q4nx/dflash_acceptance_device.py --exactness)."""\n' + _PATH +
                _twin_import("dflash") + _twin_main("dflash"))
    return (f'"""{name}: speculative decoding with the drafter (the engineer writes it): --prompts P --n N --n-tokens T '
            "--block B\n--exactness --out F, printing the lines of mlir-air's "
            "qwen3_4b_q4nx/dflash_acceptance_device.py (43e773e) that\nnpu_kernels/mlir_air/dflash.py lists, and "
            'writing its --out record (rows of per-block lengths)."""\n'
            f"raise SystemExit('{name}_dflash.py is the scaffold\\'s skeleton, not written yet: its docstring "
            "says what make dflash-exactness prints')\n")


def _inference(name: str, stand_in: bool) -> str:
    if stand_in:
        return (f'"""{name}: make run / make profile (npu-ledger stand-in: emulated tokens, modelled NPU2 figures)."""\n'
                + _PATH + _STAND_IN_IMPORT +
                "main = stand_in.main\n\n"
                "if __name__ == \"__main__\":\n    sys.exit(main([\"--model-dir\", HERE, *sys.argv[1:]]))\n")
    return (f'"""{name}: production inference (the engineer writes it: build_config(), setup(config, max_seq),\n'
            "run_npu_prefill(state, tokens, lite), run_npu_decode_step(state, token, pos) for verify_adapter.py,\n"
            "and a CLI --compile-only / --run-only --n-tokens N --prompt P --model M [--profile] printing the lines\n"
            "of PE/llms/llama32_1b/llama32_1b_inference.py:672-756 and :801-934; --interactive for make chat;\n"
            "--prefill-only --seq-len N for make profile-prefill, printing `Compiling prefill kernels (seq_len=N)` and\n"
            "`Time to first token (TTFT): <s>s`, the lines PE/llms/bench/sweep_prefill.py reads; --decode-contexts C,..\n"
            'for make profile-decode: `[bench] decode ctx=C median M ms min m ms (T tok/s)`, sweep_decode_runtime.py)."""\n'
            f"raise SystemExit('{name}_inference.py is the scaffold\\'s skeleton, not written yet: its docstring says what "
            "verify_adapter.py and the Makefile call')\n")


# run_npu2_*.lit: lit tests in the form of mlir-air's model directories (PE/llms/llama32_1b/run_npu2_compile.lit,
# run_npu2_verify.lit, run_npu2_profile.lit @e972f29; run_npu2_prefill_sweep.lit @f4ffd43): a header saying what
# the test gates, REQUIRES, RUN lines through the model Makefile and the shared bench scripts, CHECK lines.
_LIT_WHAT = {
    "compile": ("compile-only smoke test: every kernel ELF builds; no NPU dispatch, no weights.",
                ["make -f %S/Makefile compile PEANO_INSTALL_DIR=%PEANO_INSTALL_DIR | FileCheck %s"],
                ["Compilation passed."]),
    "verify": ("verify gate: top-k token inclusion, NPU vs HF bf16, 2 prompts x 32 greedy tokens, k=5 "
               "(make verify-full: every prompt).",
               ["make -f %S/Makefile verify PEANO_INSTALL_DIR=%PEANO_INSTALL_DIR | FileCheck %s"],
               ["[verify] PASS"]),
    "profile": ("profiling: TTFT and decode throughput into {name}.perf.json through bench/extract_perf.py; gates "
                "only that profiling ran end to end (correctness: run_npu2_verify.lit).",
                ["make -f %S/Makefile profile PEANO_INSTALL_DIR=%PEANO_INSTALL_DIR N_TOKENS=128 "
                 "PROMPT=\"What is the capital of France?\" | tee profile.txt",
                 "%PYTHON %S/../bench/extract_perf.py profile.txt --model {name} > {name}.perf.json",
                 "FileCheck %s < {name}.perf.json"],
                ['"model": "{name}"']),
    "prefill_sweep": ("prefill TTFT against the padded prefill length into {name}.prefill_sweep.json "
                      "(bench/sweep_prefill.py, make profile-prefill CTX=<length>); latency only.",
                      ["%PYTHON %S/../bench/sweep_prefill.py --model-name {name} --makefile %S/Makefile "
                       "--lengths 512,1024,2048 --seq-env LLM_SEQ_LEN --bench-env LLM_BENCH_L "
                       "--peano-dir %PEANO_INSTALL_DIR --out {name}.prefill_sweep.json",
                       "FileCheck %s < {name}.prefill_sweep.json"],
                      ['"model": "{name}"', '"axis": "prefill_len"']),
}


def _lit(name: str, kind: str, stand_in: bool) -> str:
    what, runs, checks = _LIT_WHAT[kind]
    # a stand-in directory needs no NPU, and must not run in mlir-air's CI: a feature its lit config never defines
    requires = "npu_ledger_stand_in" if stand_in else "ryzen_ai_npu2, peano"
    lines = ["// SPDX-License-Identifier: MIT", "//", f"// {name} {what.format(name=name)}",
             "// Written by `ledger scaffold` (npu-ledger) in the form of mlir-air's run_npu2_*.lit files.", "//",
             f"// REQUIRES: {requires}", "//", f"// RUN: mkdir -p test_peano_{kind}", f"// RUN: cd test_peano_{kind}",
             "// RUN: make -f %S/Makefile clean"]
    lines += [f"// RUN: {r.format(name=name)}" for r in runs]
    lines += [f"// CHECK: {c.format(name=name)}" for c in checks]
    return "\n".join(lines) + "\n"


def _readme(name: str, stand_in: bool) -> str:
    kind = ("an npu-ledger stand-in: the adapter runs npu-ledger's emulated pipeline; every figure `make run` / "
            "`make profile` prints is modelled (NPU2 performance model)") if stand_in else "the NPU2 deployment"
    return (f"# {name}\n\nmlir-air model directory written by `ledger scaffold` ({kind}).\n\n"
            "    make verify       # top-k token gate, 2 prompts (make verify-full: all)\n"
            "    make verify-walk  # npu-ledger's teacher-forced walk, same adapter, prompts and reference\n"
            "    make diagnosis    # per-layer ffn_out cosine on PROMPT\n"
            "    make run          # TTFT and tokens/s\n    make profile      # + per-ELF breakdown\n"
            "    make chat         # one reply per prompt read from stdin\n"
            "    make profile-prefill CTX=1024   # warm prefill TTFT at a padded length (make bench: the same)\n\n"
            "The `run_npu2_*.lit` files are lit tests in mlir-air's form (compile, verify, profile, prefill sweep).\n\n"
            "Run each under `flock -x -w 1800 /tmp/mlir-air-npu.lock make <target>`; no recipe takes the lock.\n\n"
            "No file here names a path of one machine. By hand, give what npu-ledger passes on each make call:\n\n"
            "    make verify PYTHON=<python with the model's dependencies> NPU_LEDGER=<npu-ledger checkout, or empty "
            "if installed> NPU_LEDGER_MODEL=<model folder or HF id>\n")


def scaffold(mlir_air_dir: str | Path, name: str, model_path: str, config, stand_in: str | None = None,
             switches: dict[str, bool] | None = None, drafter: bool = False) -> dict:
    """Write (or refresh) the model directory; return {"dir", "written", "kept"}. `switches`: the deployment's
    (handlers.gates.runtime.declared_options), which ARCHITECTURE.md states and lays the ELFs out under. `drafter`:
    the deployment declared one (speculative decoding): `dflash-exactness` and `<name>_dflash.py` are written too.
    ScaffoldError, nothing written: a name that is no identifier, no checkout, a hardware directory asked of a
    twin, or a directory a scaffold wrote as the other kind."""
    if stand_in not in (None, "emulated"):
        raise ScaffoldError(f"unknown stand-in {stand_in!r}; the one stand-in is 'emulated'")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ScaffoldError(f"{name!r} cannot be an mlir-air model directory: verify_runner imports "
                            f"`{name}.verify_adapter`, so the name must be a Python identifier")
    root = Path(mlir_air_dir).expanduser().resolve()
    if not (root / "programming_examples" / "llms" / "verify" / "verify_runner.py").is_file():
        raise ScaffoldError(f"{root} is not an mlir-air checkout (no programming_examples/llms/verify/verify_runner.py)")
    if is_twin(root) and not stand_in:
        raise ScaffoldError(f"{root} is a twin (`ledger twin`: no NPU), where a hardware model directory cannot run: "
                            "give `--stand-in emulated` to rehearse on npu-ledger's emulated pipeline")
    d = root / "programming_examples" / "llms" / name
    kind, was = ("stand-in" if stand_in else "hardware"), scaffolded_kind(d)
    if was not in (None, kind):
        raise ScaffoldError(f"{d} holds a {was} scaffold ({'with' if was == 'stand-in' else 'no'} stand_in.json) and "
                            f"a directory is one kind, never both: remove it first to write a {kind} one")
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "Makefile": _makefile(name, bool(stand_in), build_seq(config), conv=bool(config.arch.conv_layers()),
                              drafter=drafter),
        "verify_adapter.py": _adapter(name, str(model_path), bool(stand_in)),
        f"{name}_inference.py": _inference(name, bool(stand_in)),
        "README.md": _readme(name, bool(stand_in)),
        "ARCHITECTURE.md": architecture_page(name, config, switches),
        ".gitignore": GITIGNORE,
        **{f"run_npu2_{kind}.lit": _lit(name, kind, bool(stand_in)) for kind in _LIT_WHAT},
        "__init__.py": "",
    }
    if config.arch.conv_layers():  # a short-convolution model: its carried state's decode gate
        files[f"{name}_decode_gate.py"] = _decode_gate(name, bool(stand_in))
    if drafter:  # speculative decoding: mlir-air's DFlash --exactness run
        files[f"{name}_dflash.py"] = _dflash(name, bool(stand_in))
    if stand_in:
        files[STAND_IN_FILE] = json.dumps({"model": _model_ref(str(model_path)), "stand_in": stand_in},
                                            indent=1) + "\n"
    mpath = d / MANIFEST
    manifest = json.loads(mpath.read_text()) if mpath.is_file() else {}
    written, kept = [], []
    for rel, text in files.items():
        path = d / rel
        if path.exists():
            now = _sha(path.read_text())
            if manifest.get(rel) != now:  # the engineer's file, or one the engineer changed
                if now != _sha(text):
                    kept.append(rel)
                continue
        path.write_text(text)
        manifest[rel] = _sha(text)
        written.append(rel)
    mpath.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return {"dir": str(d), "written": written, "kept": kept}

