"""The mlir-air model backend: Phases 2-7 through an mlir-air model directory's make targets.

`MlirAirBackend` implements `npu_kernels.backends.base.ModelBackend` over
`$MLIR_AIR_DIR/programming_examples/llms/<name>/` (written by `ledger scaffold`):

  block_gate / diagnose   `make diagnosis PROMPT=<canonical prompt>`: the diagnosis report's layer-0 `ffn_out`
                          row gives the per-position minimum (cosine.min), p5, median, max_abs, max_rel; the
                          whole-tensor cosine is the twin's `npu_ledger.cosine` key, and on a real checkout
                          (no such key) the mean per-position cosine, said in the result's thresholds note.
  token_gate              two targets, both judged: `make verify` (`verify-full` with --full), mlir-air's gate
                          unchanged, gives the first-divergence fields from its reports/verify_topk_token_*.json
                          row (it needs no key beyond mlir-air's report schema); `make verify-walk`
                          (`verify-walk-full`), npu-ledger's teacher-forced walk on the same adapter, reference
                          and prompts (npu_kernels.mlir_air.walk), gives the walk (tf_*), the greedy tokens and their
                          text from its teacher_forced_walk_*.json. Both first divergences must agree (the same
                          runner walked the same tokens). The provenance records both commands and reports.
                          A prompt of the full set (`Prompt.full`) is judged on the -full targets' reports.
  conv_state_check        a short-convolution model's `make decode-gate` (mlir-air's lfm2 decode gate,
                          npu_kernels.mlir_air.decode_gate_report): a ConvStateChecked of method "decode-gate".
  speculation_check       a deployment with a drafter's `make dflash-exactness` (the flags of mlir-air's qwen3_4b_q4nx
                          dflash_acceptance_device.py --exactness, npu_kernels.mlir_air.dflash): the fields of a
                          SpeculationChecked, per prompt `exact_for` [SAME, K] and the --out record's per-block lengths.
  bisect_block            none: make targets cannot swap a kernel to FP32 (`can_bisect` False).
  prompts                 mlir-air's prompt file (programming_examples/llms/verify/prompts/instruct.txt, raw
                          `tokenizer.encode`, read at run time) when the checkout has one, else npu-ledger's.
  measure_prefill/decode  `make profile`, read as bench/extract_perf.py reads it (npu_kernels.mlir_air.model_profile):
                          `End-to-end (prefill, per query)` / `End-to-end (per token)` where printed (llama32_1b),
                          else the TTFT / tok/s formats the other drivers print; the NPU2 model's figures
                          beside them. The printed figure is the judge (source "mlir-air-profile").
  npu2_figures            `make profile`'s figures (source "mlir-air-profile"), the NPU2 model's beside them; its
                          curve `make sweep-prefill` (mlir-air's bench/sweep_prefill.py over `profile-prefill
                          CTX=L`) and `make sweep-decode` (bench/sweep_decode_runtime.py over one `profile-decode
                          CONTEXTS=...`), npu_kernels.mlir_air.sweeps: measured, the modelled curve beside it.
  integrated_run          `make run N_TOKENS=32`: TTFT, Tokens/second, Time/token.
  with_options            a copy whose make calls carry NPU_LEDGER_SWITCHES / NPU_LEDGER_FAULTS (the stand-in's
                          adapter switches the optimisation itself; a hardware model directory ignores them:
                          there `ledger optimise NAME --what TEXT` records what the engineer changed).

Every result's provenance holds the command, the report's (or transcript's) sha256 and the checkout's commit; a
token gate's is `make verify`'s, with `make verify-walk`'s under `walk`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.output import TranscriptError, failure_tail, sha256_text
from npu_kernels.mlir_air.checkout import ROOT, is_twin, standin_reasons
from npu_kernels.mlir_air.model_profile import parse_model_profile
from npu_kernels.mlir_air.walk_report import parse_walk_output, report_path
from npu_kernels.mlir_air.decode_gate_report import parse_decode_gate
from npu_kernels.mlir_air.dflash import DflashOutputError, parse_exactness
from npu_kernels.provenance import run_provenance
from npu_kernels.backends.base import IntegratedRun, Measurement, Npu2Figures
from npu_kernels.model.compare import BisectResult, BlockResult, TokenGateResult, token_gate_failure
from npu_kernels.model.hf_reference import load_tokenizer
from npu_kernels.model.options import SWITCHES as PIPELINE_SWITCHES
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.speculative import acceptance_summary
from npu_kernels.model.prompts import CANONICAL_PROMPT, Prompt, mlir_air_prompts, prompts_for
from npu_kernels.mlir_air.sweeps import hardware_curve, parse_decode_sweep, parse_prefill_sweep
from npu_kernels.perf.dispatch import SWITCHES
from npu_kernels.perf.curve import context_window, npu2_curve
from npu_kernels.perf.figures import DECODE, build_seq, decode_ctx, npu2_figures, path_switches
from npu_kernels.thresholds import DECODE_GATE_THRESHOLDS, block_thresholds
from npu_kernels.settings import env_get, stand_in_python

_TTFT = re.compile(r"^\s*(?:Warm time|Time) to first token \(TTFT\):\s*([\d.]+)\s*s.*?(?:First token:\s*(\d+))?$", re.M)
_TPS = re.compile(r"Tokens/second:\s*([\d.]+)")
_TPT = re.compile(r"Time/token:\s*([\d.]+)\s*ms")
_ELF_ROW = re.compile(r"^  (\S+\.elf|[\w:/ .-]+?)\s{2,}NPU\s+([\d.]+) ms\s+x(\d+)", re.M)
_PROMPT_LEN = re.compile(r"prompt_len[=:]\s*(\d+)")


class MlirAirBackendError(RuntimeError):
    pass


def _sha_file(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class MlirAirBackend:
    """See the module docstring."""

    name = "mlir-air"
    switches_keep_numbers = False  # a switch is another compiled program: each keeps its own token-gate re-run
    hardware = True
    can_bisect = False  # make targets cannot swap one kernel to FP32
    runs_q4nx_device = False  # llama32_1b_q4nx's fused decode is not driven by this backend (yet)
    # speculative decoding (issue 46 item 3): `make dflash-exactness` (mlir-air's qwen3_4b_q4nx
    # dflash_acceptance_device.py --exactness, read by npu_kernels.mlir_air.dflash), which `ledger scaffold` writes for
    # a deployment with a drafter; a model directory without it is a FAIL saying so (speculation_check)
    runs_speculation = True
    block_remeasure_atol = None  # a device's `make diagnosis` re-run has no agreed band: the evaluator does not re-run it

    def __init__(self, model_path: str | Path, config, deployment: str, target: str = "npu2",
                 switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset(),
                 mlir_air_dir: str | None = None) -> None:
        self.model_path, self.config, self.deployment, self.target = str(model_path), config, deployment, target
        self.mlir_air_dir = mlir_air_dir or env_get("MLIR_AIR_DIR")
        if not self.mlir_air_dir:
            raise MlirAirBackendError("the mlir-air backend needs MLIR_AIR_DIR (an mlir-air checkout, or `ledger twin DIR`)")
        self.model_dir = Path(self.mlir_air_dir) / "programming_examples" / "llms" / deployment
        if not (self.model_dir / "Makefile").is_file():
            raise MlirAirBackendError(f"no model directory {self.model_dir}: run `ledger scaffold {deployment}` first")
        known = {*SWITCHES, *(DECODE + k for k in SWITCHES)}
        self._switches = {k: bool(v) for k, v in (switches or {}).items() if k in known}
        self._faults = frozenset(faults)
        self.executor = MlirAirExecutor(target, mlir_air_dir=self.mlir_air_dir)
        self._cache: dict[str, Any] = {}
        # a stand-in whatever the checkout: a twin, or a model directory scaffolded as a stand-in (its stand_in.json,
        # or scripts that call npu-ledger's stand-in package); each run's own `ran` facts are checked again
        self.stand_in = is_twin(self.mlir_air_dir) or bool(standin_reasons(self.model_dir.resolve()))

    # -- options --

    @property
    def options(self) -> dict[str, Any]:
        numerics = {k: self._switches.get(k, False) or self._switches.get(DECODE + k, False) for k in PIPELINE_SWITCHES}
        return {**PipelineOptions(**numerics, faults=self._faults).to_dict(),
                "switches": dict(sorted(self._switches.items()))}

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "MlirAirBackend":
        return MlirAirBackend(self.model_path, self.config, self.deployment, self.target, switches, faults,
                              self.mlir_air_dir)

    def _make_vars(self, **extra) -> dict[str, Any]:
        on = ",".join(k for k, v in sorted(self._switches.items()) if v)
        # a scaffolded Makefile names no path of this machine: the checkout and model come from here, and for a
        # stand-in model directory (its scripts are npu-ledger's) the interpreter too; a real one keeps its PYTHON
        here = {"NPU_LEDGER": str(ROOT), "NPU_LEDGER_MODEL": str(self.model_path)}
        if (Path(self.model_dir) / "stand_in.json").is_file():
            here = {"PYTHON": stand_in_python(), **here}
        return {"NPU_LEDGER_SWITCHES": on, "NPU_LEDGER_FAULTS": ",".join(sorted(self._faults)), **here, **extra}

    def _provenance(self, command: str, prov: dict, report_path: str | None, transcript: str) -> dict[str, Any]:
        return {"command": command, "report_path": report_path or "",
                "report_sha256": _sha_file(report_path) if report_path else "",
                "transcript_sha256": sha256_text(transcript), "returncode": prov.get("returncode"),
                "mlir_air_commit": (prov.get("toolchain") or {}).get("mlir_air_commit"),
                "mlir_air_dir": str(self.mlir_air_dir), "stand_in": self.stand_in,
                "lock": prov.get("lock_held_by", "tool"),
                # what npu_kernels.provenance decides a figure's class from: the probed tools and the device
                "toolchain": dict(prov.get("toolchain") or {}), "device": prov.get("device"),
                "ran": dict(prov.get("ran") or {}),
                # a run that ended only after earlier tries gave no verdict (npu_kernels.mlir_air.lock.run_retried)
                **({"inconclusive_tries": prov["inconclusive_tries"]} if prov.get("inconclusive_tries") else {})}

    # -- tokenizer and prompts --

    def tokenizer(self):
        return load_tokenizer(self.model_path)  # one per process and folder

    def _canonical_text(self) -> str:
        return CANONICAL_PROMPT

    def prompts(self, full: bool) -> list[Prompt]:
        return mlir_air_prompts(self.tokenizer(), full, self.mlir_air_dir) or prompts_for(self.tokenizer(), full=full)

    # -- Phase 2 and diagnosis: make diagnosis --

    def _diagnosis(self):
        if "diagnosis" not in self._cache:
            run = self.executor.run_model_diagnosis(self.model_dir, make_vars=self._make_vars(PROMPT=self._canonical_text()))
            self._cache["diagnosis"] = (run, self._provenance(run.command, run.provenance, run.report_path, run.transcript))
        return self._cache["diagnosis"]

    def block_gate(self, layer: int = 0) -> BlockResult:
        run, prov = self._diagnosis()
        rows = [r for r in run.report_json.get("per_layer") or [] if r.get("name") == "ffn_out" and r.get("layer") == layer]
        if not rows:
            raise MlirAirBackendError(f"`{run.command}`: the diagnosis report {run.report_path} has no layer-{layer} "
                                      "ffn_out row")
        row = rows[0]
        ext = row.get("npu_ledger") or {}
        cos, err = row["cosine"], row["errors"]
        whole = ext.get("cosine", cos["mean"])
        n = ext.get("n_positions") or len(self.tokenizer().encode(self._canonical_text()))
        nan = int(ext.get("nan_count", 0)) + sum(1 for v in (*cos.values(), *err.values()) if isinstance(v, float) and math.isnan(v))
        th = block_thresholds(self.config.head_dim)
        passed = not nan and whole >= th["cosine"] and cos["min"] >= th["per_position_min"]
        result = BlockResult(layer=layer, executor=self.name, n_positions=int(n), cosine=float(whole),
                             per_position_min=float(cos["min"]), p5=float(cos["p5"]), median=float(cos["median"]),
                             max_abs=float(err["max_abs"]), max_rel=float(err.get("max_rel", float("nan"))),
                             nan_count=nan, thresholds=th, passed=bool(passed))
        result.provenance = {**prov, "cosine_source": "whole-tensor" if "cosine" in ext else "mean per-position cosine"}
        return result

    def conv_state_check(self) -> dict[str, Any]:
        """`make decode-gate` (mlir-air's lfm2 decode gate, npu_kernels.mlir_air.decode_gate_report): the fields of a
        ConvStateChecked, method "decode-gate", with the run's provenance and class. A transcript that does not read
        as the gate's is a FAIL saying why in one line (`problem`), recorded with what ran."""
        command, rc, text, prov = self.executor.run_model_target("decode_gate", self.model_dir,
                                                                 make_vars=self._make_vars())
        provenance = self._provenance(command, prov, None, text)
        fields = {"executor": self.name, "provenance": provenance, "provenance_class": run_provenance(provenance)}
        try:
            return {**fields, **parse_decode_gate(text, rc).event_fields()}
        except TranscriptError as e:
            hint = (" (the model directory's Makefile has no decode-gate target: `ledger scaffold` writes it for a "
                    "short-convolution model; a Makefile you changed is kept, so add the target as the scaffold "
                    "writes it)" if "No rule to make target" in text else "")
            return {**fields, "method": "decode-gate", "n_positions": 0, "layers": [], "logits_cosine": math.nan,
                    "top1_agrees": False, "thresholds": dict(DECODE_GATE_THRESHOLDS), "passed": False,
                    "problem": f"`{command}` (exit status {rc}): {e}{hint}; last line: {failure_tail(text)}"}

    def speculation_check(self, prompts: list[Prompt], drafter_path: str, block: int, n_tokens: int,
                          faults: frozenset[str] = frozenset()) -> dict[str, Any]:
        """`make dflash-exactness` on `prompts` (their tokens in DFLASH_PROMPTS, as mlir-air's --prompts file) with the
        drafter folder in NPU_LEDGER_DRAFTER, `faults` (the speculative loop's drills) added to NPU_LEDGER_FAULTS: the
        fields of a SpeculationChecked (no `drafter`). Per prompt `exact_for` [SAME, K] from the transcript, the
        per-block acceptance lengths from the --out record; mean / s.e. are those lengths' (the transcript's, printed
        to 3 decimals, must agree). A run that does not read as the script's is a FAIL saying why in one line
        (`problem`), recorded with what ran."""
        reports = self.model_dir / "reports"
        reports.mkdir(exist_ok=True)
        stem = f"dflash_{len(list(reports.glob('dflash_*_raw.json'))):04d}"
        prompt_file, out = reports / f"{stem}_prompts.json", reports / f"{stem}_raw.json"
        prompt_file.write_text(json.dumps([[int(t) for t in p.tokens] for p in prompts]))
        out.unlink(missing_ok=True)
        fields: dict[str, Any] = {"executor": self.name, "block": int(block), "n_tokens": int(n_tokens),
                                  "faults": sorted(faults), "prompts": [], "passed": False, "exact_prompts": 0}
        if not re.search(r"^dflash-exactness:", (self.model_dir / "Makefile").read_text(), re.M):
            return {**fields, "source": "", "problem": (
                f"{self.model_dir}/Makefile has no dflash-exactness target: `ledger scaffold` writes it for a "
                "deployment with a drafter (a Makefile you changed is kept: add the target as the scaffold writes it)")}
        make_vars = self._make_vars(
            NPU_LEDGER_FAULTS=",".join(sorted(self._faults | set(faults))), NPU_LEDGER_DRAFTER=str(drafter_path),
            DFLASH_PROMPTS=str(prompt_file), DFLASH_N=len(prompts), DFLASH_N_TOKENS=int(n_tokens),
            DFLASH_BLOCK=int(block), DFLASH_OUT=str(out))
        command, rc, text, prov = self.executor.run_model_target("dflash_exactness", self.model_dir, make_vars=make_vars)
        provenance = self._provenance(command, prov, str(out) if out.is_file() else None, text)
        fields.update(source=command, provenance=provenance, provenance_class=run_provenance(provenance))
        try:
            rows = self._speculation_rows(prompts, n_tokens, text, rc, out)
        except DflashOutputError as e:
            return {**fields, "problem": f"`{command}` (exit status {rc}): {e}; last line: {failure_tail(text)}"}
        lengths = [n for r in rows for n in r["acceptance"]]
        mean, sem = acceptance_summary(lengths)
        exact = sum(r["first_divergence"] is None for r in rows)
        return {**fields, "prompts": rows, "passed": exact == len(rows), "exact_prompts": exact,
                "acceptance_mean": mean, "acceptance_sem": sem, "n_verify_passes": len(lengths)}

    @staticmethod
    def _speculation_rows(prompts: list[Prompt], n_tokens: int, text: str, rc: int, out: Path) -> list[dict]:
        """The SpeculationChecked rows of one dflash-exactness run, or DflashOutputError in one line."""
        if rc != 0:
            raise DflashOutputError("the run failed")
        parsed = parse_exactness(text)
        try:
            raw = json.loads(out.read_text())["rows"]
            acc = [[int(n) for n in r["acc"]] for r in raw]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DflashOutputError(f"its --out record {out} is unreadable ({type(e).__name__})") from e
        if len(parsed.prompts) != len(prompts) or len(acc) != len(prompts):
            raise DflashOutputError(f"{len(prompts)} prompts asked, {len(parsed.prompts)} printed, {len(acc)} in --out")
        rows = []
        for prompt, p, lengths in zip(prompts, parsed.prompts, acc):
            their_mean = sum(lengths) / max(len(lengths), 1)
            if p.compared != n_tokens or p.blocks != len(lengths) or abs(p.mean - their_mean) > 6e-4:
                raise DflashOutputError(f"prompt {p.index}: exact for {p.same}/{p.compared} over {p.blocks} blocks, "
                                        f"mean {p.mean}, against {n_tokens} tokens asked and --out's {len(lengths)} "
                                        f"blocks (mean {their_mean:.4f})")
            rows.append({"index": prompt.index, "prompt": prompt.text, "exact_for": [p.same, p.compared],
                         "first_divergence": None if p.same == p.compared else p.same, "acceptance": lengths})
        mean = sum(sum(r["acceptance"]) for r in rows) / max(sum(len(r["acceptance"]) for r in rows), 1)
        if abs(parsed.acceptance_mean - mean) > 6e-4:
            raise DflashOutputError(f"the printed mean {parsed.acceptance_mean} is not --out's per-block lengths' "
                                    f"({mean:.4f})")
        return rows

    def bisect_block(self) -> BisectResult:
        raise MlirAirBackendError("mlir-air's make targets cannot swap a kernel to FP32: no bisect (can_bisect is False)")

    def diagnose(self) -> list[dict[str, Any]]:
        run, prov = self._diagnosis()
        return [{**row, "provenance": prov} for row in run.result.layers]

    # -- Phases 3, 6, 7: make verify --

    def _verify(self, full: bool):
        key = "verify_full" if full else "verify"
        if key not in self._cache:
            run = self.executor.run_model_verify(self.model_dir, full=full, make_vars=self._make_vars())
            self._cache[key] = (run, self._provenance(run.command, run.provenance, run.report_path, run.transcript))
        return self._cache[key]

    def _walk(self, full: bool):
        """`make verify-walk` (`verify-walk-full`): the teacher-forced walk's parsed report and provenance."""
        key = "verify_walk_full" if full else "verify_walk"
        if key not in self._cache:
            command, rc, text, prov = self.executor.run_model_target(
                key, self.model_dir, make_vars=self._make_vars())
            path = report_path(text, self.model_dir)
            tail = failure_tail(text)  # a traceback's last lines, escaped, when the run printed one
            if path is None:
                hint = (" (the model directory's Makefile has no verify-walk target: `ledger scaffold` writes it; "
                        "a Makefile you changed is kept, so add the target as the scaffold writes it)"
                        if "No rule to make target" in text else "")
                raise MlirAirBackendError(f"`{command}` (exit status {rc}) named no teacher-forced walk report{hint}: {tail}")
            try:
                result = parse_walk_output(text, json.loads(Path(path).read_text()))
            except (OSError, ValueError, TranscriptError) as e:
                raise MlirAirBackendError(f"`{command}` (exit status {rc}): its walk report {path}: {e}") from e
            if (result.verdict == "PASS") != (rc == 0):
                raise MlirAirBackendError(f"`{command}` printed [walk] {result.verdict} but exited with status {rc}")
            self._cache[key] = (result, self._provenance(command, prov, path, text))
        return self._cache[key]

    def token_gate(self, prompt: Prompt, context: str) -> TokenGateResult:
        run, prov = self._verify(prompt.full)
        walk, walk_prov = self._walk(prompt.full)
        p = {x.prompt_index: x for x in run.result.prompts}.get(prompt.index)
        if p is None or p.prompt != prompt.text:
            raise MlirAirBackendError(f"`{run.command}`: its report {run.report_path} has no row for prompt "
                                      f"{prompt.index} {prompt.text!r} (the checkout's prompt file and the gate's differ)")
        w = walk.by_index().get(prompt.index)
        if w is None or w.prompt != prompt.text:
            raise MlirAirBackendError(f"`{walk_prov['command']}`: its report {walk_prov['report_path']} has no walk for "
                                      f"prompt {prompt.index} {prompt.text!r}")
        fields: dict[str, Any] = dict(
            prompt_index=p.prompt_index, prompt=p.prompt, executor=self.name, pipeline=self.options, n_tokens=p.n_tokens,
            top_k=p.top_k, divergence_step=p.divergence_step, agreed_prefix=p.agreed_prefix,
            chosen_ours=p.chosen_ours, chosen_ref=p.chosen_ref, topk_ours=p.topk_ours, topk_ref=p.topk_ref,
            rank_ours_in_ref=p.rank_ours_in_ref, rank_ref_in_ours=p.rank_ref_in_ours, context=context,
            first_divergence_passed=p.passed, **w.fields)
        agree = (w.divergence_step, w.first_divergence_passed) == (p.divergence_step, p.passed)
        fields["passed"] = bool(p.passed and w.fields["tf_passed"] and agree)
        # mlir-air's report holds no KL: the walk's over the greedy steps (up to the first divergence)
        upto = p.divergence_step if p.divergence_step is not None else p.n_tokens - 1
        fields["kl_per_step"] = list(p.kl_per_step) or list(w.fields["tf_kl_per_step"][: upto + 1])
        fields["kl_divergence"] = p.kl_divergence if p.kl_divergence is not None else (
            fields["kl_per_step"][-1] if fields["kl_per_step"] else None)
        result = TokenGateResult(**fields)
        reasons = []
        if not agree:
            reasons.append(f"`{run.command}` and `{walk_prov['command']}` disagree on the first divergence (step "
                           f"{p.divergence_step} {'PASS' if p.passed else 'FAIL'} vs step {w.divergence_step} "
                           f"{'PASS' if w.first_divergence_passed else 'FAIL'}): one runner, the same tokens, two answers")
        if not (p.passed and w.fields["tf_passed"]):
            reasons.append(token_gate_failure(result))
        result.reason = "; ".join(reasons)
        result.provenance = {**prov, "walk": walk_prov}
        if not result.text_ours and result.tokens_ours:  # a walk report without the text: decode it here
            tokenizer = self.tokenizer()
            result.text_ours, result.text_ref = tokenizer.decode(result.tokens_ours), tokenizer.decode(result.tokens_ref)
        return result

    # -- Phases 4-6: make profile / make run --

    def _profile(self) -> dict[str, Any]:
        if "profile" not in self._cache:
            command, rc, text, prov = self.executor.run_model_target(
                "profile", self.model_dir, make_vars=self._make_vars(N_TOKENS=2, PROMPT=self._canonical_text()))
            if rc != 0:
                raise MlirAirBackendError(f"`{command}` exited with status {rc}: {failure_tail(text)}")
            try:  # every format of mlir-air's bench/extract_perf.py; the End-to-end lines first (no LM head)
                figs = parse_model_profile(text)
            except TranscriptError as e:
                raise MlirAirBackendError(f"`{command}`: {e}") from e
            prefill_ms = figs.prefill_ms if figs.prefill_ms is not None else figs.ttft_ms
            token_ms = figs.ms_per_token if figs.ms_per_token is not None else (
                1e3 / figs.decode_tokens_per_sec if figs.decode_tokens_per_sec else None)
            if prefill_ms is None or token_ms is None:
                raise MlirAirBackendError(f"`{command}` printed no {'TTFT' if prefill_ms is None else 'decode'} line "
                                          "in any format of mlir-air's bench/extract_perf.py")
            seq = [int(m) for m in _PROMPT_LEN.findall(text)]
            head, _, tail = text.partition("--- DECODE")
            elfs = {path: {m.group(1).strip(): {"total_ms": float(m.group(2)), "calls": int(m.group(3))}
                           for m in _ELF_ROW.finditer(part)} for path, part in (("prefill", head), ("decode", tail))}
            self._cache["profile"] = {"prefill_s": prefill_ms / 1e3, "s_per_token": token_ms / 1e3,
                                      "seq": seq[-1] if seq else build_seq(self.config), "per_elf": elfs,
                                      "provenance": self._provenance(command, prov, None, text)}
        return self._cache["profile"]

    def _modelled(self) -> dict[str, Any]:
        f = npu2_figures(self.config, self._switches)
        return {k: f[k] for k in ("source", "seq", "ctx", "ttft_s", "prefill_s", "ms_per_token", "tokens_per_s", "switches")}

    def measure_prefill(self, info_tokens: int | None) -> Measurement:
        prof = self._profile()
        return Measurement("prefill_s", prof["prefill_s"], [prof["prefill_s"]], prof["seq"], "mlir-air-profile", 0, {
            "per_elf_ms": prof["per_elf"], "modelled_npu2": self._modelled(), "provenance": prof["provenance"],
            "switches": {k: bool(self._switches.get(k, False)) for k in SWITCHES}})

    def measure_decode(self, info_tokens: int | None, steps: int) -> Measurement:
        prof = self._profile()
        return Measurement("s_per_token", prof["s_per_token"], [prof["s_per_token"]], decode_ctx(self.config),
                           "mlir-air-profile", 0, {
                               "per_elf_ms": prof["per_elf"], "modelled_npu2": self._modelled(),
                               "provenance": prof["provenance"],
                               "switches": {k: bool(self._switches.get(DECODE + k, False)) for k in SWITCHES}})

    def sweep_curve(self) -> dict[str, Any]:
        """The model directory's `make sweep-prefill` and `make sweep-decode` (npu_kernels.mlir_air.sweeps): TTFT against
        padded prefill length and decode tokens/s against context, measured; the modelled curve beside them. A
        sweep that gave no point is recorded as not swept, saying why."""
        modelled = npu2_curve(self.config, path_switches(self._switches, "prefill"),
                              path_switches(self._switches, "decode"), max_positions=context_window(self.model_path))
        requested = [p["prefill_len"] for p in modelled["prefill"]["points"] if p["status"] == "ok"]
        skipped = {p["prefill_len"]: f"{p['status']}: {p.get('detail', '')}" for p in modelled["prefill"]["points"]
                   if p["status"] != "ok"}  # lengths the model gives no figure for (past the context window, ...)
        command, rc, text, prov = self.executor.run_model_target(
            "sweep_prefill", self.model_dir, make_vars=self._make_vars(SWEEP_LENGTHS=",".join(map(str, requested))))
        prov = self._provenance(command, prov, None, text)
        decode, decode_why = self._decode_sweep(modelled)
        try:
            points, why = parse_prefill_sweep(text), ""
        except TranscriptError as e:
            tail = failure_tail(text)  # a traceback's last lines, escaped, when the run printed one
            points, why = [], f"`{command}` (exit status {rc}): {e}; last line: {tail}"
        return hardware_curve(points, modelled, prov, prefill_detail=why, decode=decode, decode_detail=decode_why,
                              requested=requested, skipped=skipped, config=self.config)

    def _decode_sweep(self, modelled: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """`make sweep-decode` over the modelled curve's contexts: its record's points, or none and why."""
        contexts = ",".join(str(p["context_len"]) for p in modelled["decode"]["points"] if p["status"] == "ok")
        out = Path(self.model_dir) / "reports" / "sweep_decode.json"
        out.unlink(missing_ok=True)  # a record left by an earlier run is not this run's
        command, rc, text, _ = self.executor.run_model_target(
            "sweep_decode", self.model_dir, make_vars=self._make_vars(SWEEP_CONTEXTS=contexts, SWEEP_DECODE_OUT=str(out)))
        try:
            return parse_decode_sweep(out.read_text()), ""
        except (OSError, TranscriptError) as e:
            tail = failure_tail(text)  # a traceback's last lines, escaped, when the run printed one
            return [], f"`{command}` (exit status {rc}): {e}; last line: {tail}"

    def npu2_figures(self) -> Npu2Figures:
        prof = self._profile()
        return Npu2Figures.of({"source": "mlir-air-profile", "seq": prof["seq"], "ctx": decode_ctx(self.config),
                "ttft_s": prof["prefill_s"], "prefill_s": prof["prefill_s"], "ms_per_token": prof["s_per_token"] * 1e3,
                "tokens_per_s": 1.0 / prof["s_per_token"] if prof["s_per_token"] > 0 else None,
                "per_elf": prof["per_elf"], "modelled_npu2": self._modelled(), "provenance": prof["provenance"]},
                self.sweep_curve())

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> IntegratedRun:
        command, rc, text, prov = self.executor.run_model_target(
            "run", self.model_dir, make_vars=self._make_vars(N_TOKENS=n_tokens, PROMPT=self._canonical_text()))
        ttft, tps, tpt = _TTFT.search(text), _TPS.search(text), _TPT.search(text)
        if rc != 0 or not ttft or not tps:
            raise MlirAirBackendError(f"`{command}` (exit status {rc}) printed no TTFT / Tokens/second line")
        ms = float(tpt.group(1)) if tpt else 1e3 / float(tps.group(1))
        first = [int(ttft.group(2))] if ttft.group(2) else []
        steps = [ms / 1e3] * (n_tokens - 1)  # mlir-air prints the average only; each step is that average
        return IntegratedRun(tokens=first, setup_s=0.0, prefill_s=float(ttft.group(1)), ttft_s=float(ttft.group(1)),
                             ms_per_token=ms, tokens_per_s=float(tps.group(1)),
                             profile={"decode_s_per_token": steps, "decode_s_per_token_note": "Time/token average",
                                      "provenance": self._provenance(command, prov, None, text)},
                             pipeline=self.options)
