"""The twin's `programming_examples/llms/verify/verify_runner.py`: mlir-air's CLI, report schema and lines.

The CLI is mlir-air's (verify_runner.py:197-263: --runner --model --prompt-style --npu-attn --prompt
--report-dir --no-strict --seed --prompts single|topk_token --prompts-file --max-prompts --gate-phase
--gate-file); `--runner` names an adapter module under programming_examples/llms/, imported on the sys.path
mlir-air's script has and nothing more (:48-51 put llms/ then llms/verify/ before the script's own directory,
:186-193 import the dotted name; `as_the_script`), so an adapter that imports here imports on a real checkout.
Tokenisation is raw `AutoTokenizer.encode` (:75-86), prompt files one per line with blanks and `#` lines
ignored (:89-95). The reference is HF transformers bf16 of the adapter's model folder (npu-ledger's `HfRunner`),
walked greedily first and replayed to the gate (npu_kernels.model.reference_walks: kept by content in
$NPU_LEDGER_REFERENCE_CACHE when that is set); prompts are encoded and tokens decoded with
`stand_in.stand_in_tokenizer` (AutoTokenizer's ids and text).

verify (`--prompts topk_token`): per prompt the NPU runner and the reference decode 32 tokens; the
first-divergence check is mlir-air's (comparators.py:194-268: at the first step the chosen tokens differ,
each must be in the other side's top-5), computed with npu-ledger's `token_gate`, which walks both sides on
the reference's tokens: identical to mlir-air's two greedy walks up to the first divergence, the only steps
its check reads. Each row holds the keys of mlir-air's TopKCheckRecord (comparators.py:165-188) and nothing
else: npu-ledger's teacher-forced walk is the model directory's own `make verify-walk` (npu_kernels.mlir_air.walk),
as on a real checkout. Status and summary are mlir-air's (first divergence only). The `--gate-phase auto`
subprocess split is printed as mlir-air prints it but run in one process (the capture file is never needed).

diagnosis (`--prompts single`): per-layer `ffn_out` per-position cosine min/p5/median/mean and errors
(comparators.py:18-70; last layer = the final RMSNorm output, :150-166), plus an `npu_ledger` key per row
with the whole-tensor cosine and the position count.

Reports: `<report dir>/{verify_topk_token,diagnosis}_%Y%m%d-%H%M%S.{json,md}` (report.py:63-185).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from npu_kernels.model.compare import cosine, per_position_cosine
from npu_kernels.model.compare import token_gate
from npu_kernels.model.reference_walks import Replay, reference_prefill, reference_walks
from npu_kernels.mlir_air.twin.stand_in import stand_in_tokenizer
from npu_kernels.settings import env_get

GATE_N_TOKENS, GATE_K = 32, 5  # verify_runner.py:70-71


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="verify_runner.py")
    p.add_argument("--runner", required=True)
    p.add_argument("--model", default=None)
    p.add_argument("--prompt-style", choices=["instruct", "base"], default="instruct")
    p.add_argument("--npu-attn", choices=["on", "off"], default="on")
    p.add_argument("--prompt", default="The capital of France is")
    p.add_argument("--report-dir", default=None)
    p.add_argument("--no-strict", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--prompts", choices=["single", "topk_token"], default="single")
    p.add_argument("--prompts-file", default=None)
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--gate-phase", choices=["auto", "both", "capture-npu", "compare-hf"], default="auto")
    p.add_argument("--gate-file", default=None)
    return p


def read_prompts(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def _text(tok, ids) -> str:
    return json.dumps(tok.decode(list(ids)))


def _cos_stats(a: np.ndarray, b: np.ndarray) -> tuple[dict, dict, float]:
    pos = per_position_cosine(a, b)
    diff = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    rel = diff / np.maximum(np.abs(np.asarray(b, np.float64)), 1e-6)
    return ({"min": float(pos.min()), "p5": float(np.percentile(pos, 5)), "median": float(np.median(pos)),
             "mean": float(pos.mean())},
            {"max_abs": float(diff.max()), "mean_abs": float(diff.mean()), "max_rel": float(rel.max()),
             "mean_rel": float(rel.mean())}, cosine(a, b))


def _topk_row(i: int, text: str, g, tok) -> dict:
    """mlir-air's TopKCheckRecord (report.py, comparators.py:194-268) from a TokenGateResult."""
    div = g.divergence_step
    fail = None
    if div is not None and not g.first_divergence_passed:
        parts = []
        if g.rank_ours_in_ref is None:
            parts.append(f"test chose {g.chosen_ours} but it is not in ref top-{GATE_K} ({g.topk_ref})")
        if g.rank_ref_in_ours is None:
            parts.append(f"ref chose {g.chosen_ref} but it is not in test top-{GATE_K} ({g.topk_ours})")
        fail = "; ".join(parts) or "NaN in the logits"
    row = {"pair": "npu_vs_hf", "prompt_idx": i, "prompt_text": text, "n_steps": GATE_N_TOKENS, "k": GATE_K,
           "divergence_step": div,
           "test_chosen_at_div": g.chosen_ours if div is not None else None,
           "ref_chosen_at_div": g.chosen_ref if div is not None else None,
           "test_topk_at_div": list(g.topk_ours) if div is not None else None,
           "ref_topk_at_div": list(g.topk_ref) if div is not None else None,
           "status": "OK" if g.first_divergence_passed else "FAIL", "fail_reason": fail,
           "test_chosen_rank_in_ref": g.rank_ours_in_ref if div is not None else None,
           "ref_chosen_rank_in_test": g.rank_ref_in_ours if div is not None else None,
           "test_chosen_text_at_div": _text(tok, [g.chosen_ours]) if div is not None else None,
           "ref_chosen_text_at_div": _text(tok, [g.chosen_ref]) if div is not None else None,
           "agreed_prefix_text": _text(tok, g.tokens_ours[:div]) if div is not None else None}
    return row


def _write(report_dir: Path, prefix: str, report: dict, md: str) -> tuple[Path, Path]:
    report_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    j, m = report_dir / f"{prefix}_{stamp}.json", report_dir / f"{prefix}_{stamp}.md"
    j.write_text(json.dumps(report, indent=2))
    m.write_text(md)
    return m, j


@dataclass
class _Invocation:
    """One invocation: its arguments, the adapter it loaded and what that adapter resolved."""

    a: argparse.Namespace
    here: Path
    adapter: object
    choice: str
    model_name: str
    hf_ref: str
    tok: object
    config: object
    report_dir: Path
    base_config: dict

    def hf_builder(self):
        def build():
            from npu_kernels.model.hf_reference import HfRunner  # heavy (torch, transformers): only when computed

            return HfRunner(self.hf_ref)

        return build

    def npu_runner(self, lite: bool):
        print("[verify] building NPU runner via adapter...", flush=True)
        return self.adapter.build_runner(model_name=self.model_name, config=self.config, max_seq=2048,
                                         tokenizer=self.tok, npu_attn=self.a.npu_attn == "on", lite_mode=lite)


def verify_dir() -> Path:
    """The checkout's programming_examples/llms/verify/ (the twin's script names it), else the working directory."""
    return Path(env_get("NPU_LEDGER_VERIFY_DIR") or Path.cwd())


def as_the_script() -> None:
    """sys.path[0] as `python verify_runner.py` has it, the script's directory: run as `python -m` (the twin's
    script execs that), Python puts the working directory there, which mlir-air's runner never has on its path."""
    if sys.path and sys.path[0] in ("", str(Path.cwd())):
        sys.path[0] = str(verify_dir())


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    here = verify_dir()
    for p in (str(here.parent), str(here)):  # verify_runner.py:48-51: llms/, then llms/verify/ first
        sys.path.insert(0, p)
    adapter = importlib.import_module(a.runner)  # :186-193
    choice = a.model or adapter.DEFAULT_MODEL
    model_name = adapter.resolve_model(choice)
    hf_ref = adapter.hf_reference(model_name) if hasattr(adapter, "hf_reference") else model_name
    verify = a.prompts == "topk_token"
    print(f"[verify] adapter={a.runner}, model={model_name}, hf_ref={hf_ref}, mode={'verify' if verify else 'diagnosis'}, "
          f"lite={verify}", flush=True)
    run = _Invocation(a, here, adapter, choice, model_name, hf_ref,
               stand_in_tokenizer(model_name),  # AutoTokenizer's ids and text (stand_in.FastTokenizer), no transformers
               adapter.build_config(), Path(a.report_dir) if a.report_dir else here / "reports",
               {"runner": a.runner, "model": choice, "model_name": model_name, "npu_attn": a.npu_attn == "on"})
    return _verify(run) if verify else _diagnosis(run)


def _diagnosis(run: _Invocation) -> int:
    a, tok = run.a, run.tok
    npu = run.npu_runner(lite=False)
    print(f"[verify] building HF runner ({run.hf_ref}, lite=False, may download)...", flush=True)
    ids = np.asarray(tok.encode(a.prompt)[:2048], np.int64)
    print("[diagnosis] prefill: NPU + HF...", flush=True)
    o = npu.prefill(ids)
    r = reference_prefill(run.hf_ref, [int(t) for t in ids], run.hf_builder(),
                          say=lambda line: print(f"[diagnosis] {line}", flush=True))
    print("[diagnosis] comparing per-layer ffn_out (NPU vs HF bf16)...", flush=True)
    rows = []
    n_layers = run.config.n_layers
    for layer in range(n_layers):
        if layer < n_layers - 1:
            x, y = o.layer_intermediates[layer].get("ffn_out"), r.layer_intermediates[layer].get("ffn_out")
        else:
            x, y = o.final_hidden_normed, r.final_hidden_normed
        if x is None or y is None:
            continue
        x, y = np.asarray(x)[: len(ids)], np.asarray(y)[: len(ids)]
        cos, err, whole = _cos_stats(x, y)
        rows.append({"name": "ffn_out", "pair": "npu_vs_hf", "layer": layer, "cosine": cos, "errors": err,
                     "npu_ledger": {"cosine": whole, "n_positions": int(len(ids)),
                                    "nan_count": int(np.count_nonzero(~np.isfinite(x))),
                                    "probe": "ffn_out" if layer < n_layers - 1 else "final_hidden_normed"}})
    summary = {"n_layer_records": len(rows), "topk_passed": 0, "topk_failed": 0}
    report = {"config": {"mode": "diagnosis", **run.base_config, "prompt": a.prompt}, "prompts": None,
              "per_layer": rows, "topk_checks": None, "summary": summary}
    md = "# Verify report\n\nResult: **PASS**\n\n| Layer | cos_p5 | cos_min | cos_median | max_abs |\n|---|---|---|---|---|\n" + \
        "".join(f"| {r_['layer']} | {r_['cosine']['p5']:.6f} | {r_['cosine']['min']:.6f} | "
                f"{r_['cosine']['median']:.6f} | {r_['errors']['max_abs']:.4g} |\n" for r_ in rows)
    md_path, json_path = _write(run.report_dir, "diagnosis", report, md)
    print(f"\n[verify] Report: {md_path}\n[verify] JSON:   {json_path}\n[verify] Summary: {summary}\n[verify] PASS")
    return 0


def _verify(run: _Invocation) -> int:
    a, tok = run.a, run.tok
    pfile = Path(a.prompts_file) if a.prompts_file else run.here / "prompts" / f"{a.prompt_style}.txt"
    prompts = read_prompts(pfile)
    if a.max_prompts is not None and a.max_prompts > 0:  # :370-371
        prompts = prompts[: a.max_prompts]
    n = len(prompts)
    if a.gate_phase == "auto":
        print("[verify] auto: NPU capture phase (subprocess)...", flush=True)
    print(f"[verify] top-k token gate: {n} prompts × {GATE_N_TOKENS} tokens, k={GATE_K} (from {pfile.name})", flush=True)
    npu = run.npu_runner(lite=True)
    if a.gate_phase == "auto":
        print("[verify] auto: HF compare phase (subprocess)...", flush=True)
    print(f"[verify] building HF runner ({run.hf_ref}, lite=True, may download)...", flush=True)
    ids = [tok.encode(text)[:2048] for text in prompts]
    # the reference's walks (its greedy tokens: the ones token_gate feeds both sides), read from
    # $NPU_LEDGER_REFERENCE_CACHE when it keeps them for this folder and toolchain (npu_kernels.model.reference_walks)
    refs = reference_walks(run.hf_ref, ids, GATE_N_TOKENS, run.hf_builder(),
                           say=lambda line: print(f"[verify]   {line}", flush=True))
    rows = []
    for i, text in enumerate(prompts):
        short = text if len(text) <= 60 else text[:60] + "…"
        print(f"[verify] prompt {i + 1}/{n}: {short!r}", flush=True)
        print(f"[verify]   HF greedy decode ({GATE_N_TOKENS} tokens)...", flush=True)
        g = token_gate(npu, Replay("reference", refs[i]), ids[i], n_tokens=GATE_N_TOKENS, k=GATE_K, prompt_index=i,
                       prompt=text, tokenizer=tok)
        rows.append(_topk_row(i, text, g, tok))
    failed = sum(1 for r in rows if r["status"] == "FAIL")
    summary = {"n_layer_records": 0, "topk_passed": n - failed, "topk_failed": failed}
    report = {"config": {"mode": "verify", **run.base_config, "prompt": None, "prompts_file": str(pfile),
                         "max_prompts": a.max_prompts},
              "prompts": prompts, "per_layer": [], "topk_checks": rows, "summary": summary}
    md = (f"# Verify report\n\nResult: **{'FAIL' if failed else 'PASS'}**\n\nTop-k token gate: {n - failed} PASS / "
          f"{failed} FAIL (across {n} prompt-pair checks)\n\n| # | Prompt | Steps | Diverge step | Status |\n|---|---|---|---|---|\n"
          + "".join(f"| {r['prompt_idx']} | {r['prompt_text'][:40]} | {r['n_steps']} | "
                    f"{r['divergence_step'] if r['divergence_step'] is not None else '(all match)'} | {r['status']} |\n"
                    for r in rows))
    md_path, json_path = _write(run.report_dir, "verify_topk_token", report, md)
    print(f"\n[verify] Report: {md_path}\n[verify] JSON:   {json_path}\n[verify] Summary: {summary}", flush=True)
    if failed and not a.no_strict:
        print("[verify] FAIL — see report for details.", file=sys.stderr)
        return 1
    print("[verify] PASS")
    return 0


if __name__ == "__main__":
    as_the_script()
    sys.exit(main())
