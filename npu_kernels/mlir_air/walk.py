"""`make verify-walk`: npu-ledger's teacher-forced walk on the runner mlir-air's verify runner builds.

Run by the `verify-walk` / `verify-walk-full` targets `ledger scaffold` writes into an mlir-air model directory
(`python -m npu_kernels.mlir_air.walk --runner=<name>.verify_adapter --llms-dir <programming_examples/llms> ...`).
It drives the model's adapter through mlir-air's adapter protocol as
programming_examples/llms/verify/verify_runner.py@e972f29 drives it for `make verify`:

  imports    llms/ and llms/verify/ on sys.path, the adapter by dotted path (:48-51, :186-193)
  model      adapter.DEFAULT_MODEL, resolve_model(choice), hf_reference(name) when present (:265-272)
  config     adapter.build_config(); max_seq 2048 (:274-275)
  runner     adapter.build_runner(model_name=, config=, max_seq=, tokenizer=, npu_attn=, lite_mode=True) (:300-309)
  reference  the checkout's verify/runners/hf_runner.HfRunner(model_name=hf_ref, config=, max_seq=,
             lite_mode=True, model=adapter.build_hf_model(...) when the adapter has it) (:311-338): the HF bf16
             reference `make verify` compares with; npu-ledger's HfRunner where the checkout has none (the twin)
  tokens     AutoTokenizer.from_pretrained(model_name).encode(prompt), cut to max_seq (:75-86, :376-378)
  prompts    verify/prompts/<--prompt-style>.txt or --prompts-file; blank and '#' lines skipped; --max-prompts
             keeps the first N (:63-69, :89-95, :364-371)
and reads each side through the Runner protocol: prefill(tokens).logits_at_pred, decode_step(token,
pos).lm_head_logits (runners/base.py:27-53).

The walk is `npu_kernels.model.compare.token_gate`: both sides fed the reference's greedy tokens for 32 steps
(top-5 both ways, KL(reference || ours), both log-probs of the reference token, the perplexity ratio, judged by
npu_kernels.thresholds). Memory is kept as mlir-air's `--gate-phase auto` keeps it (:380-404, the two models never
co-reside): the reference walks first and its logits are kept (32 x vocab float32 per prompt), it is released,
then the adapter's runner walks on the same tokens; token_gate replays the two recordings (a replayed side
refuses any input other than the one it recorded: npu_kernels.model.reference_walks). npu-ledger's own reference
(the twin's) is walked through `reference_walks`, which keeps its walks by content in $NPU_LEDGER_REFERENCE_CACHE
when that is set; a checkout's own verify/runners HfRunner is walked every time.

Report: `<report dir>/teacher_forced_walk_<stamp>.json` beside mlir-air's verify reports (default
llms/verify/reports, :218), read by npu_kernels.mlir_air.walk_report. Lines: `[walk] JSON: <path>`,
`[walk] Summary: {...}`, `[walk] PASS` (exit 0) or `[walk] FAIL` (exit 1).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any


from npu_kernels.model.compare import token_gate
from npu_kernels.model.reference_walks import Recorded, Replay, ReplayMismatch, record, reference_walks
from npu_kernels.thresholds import TOKEN_GATE_STEPS, TOKEN_GATE_TOP_K

MAX_SEQ = 2048  # verify_runner.py:275
REPORT_PREFIX = "teacher_forced_walk_"
SCHEMA = "npu-ledger teacher-forced walk, v1"


WalkError = ReplayMismatch  # the walk cannot compare the two sides (a replay fed other inputs, logits of another shape)
__all__ = ["Recorded", "Replay", "WalkError", "main", "record", "walk_row"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m npu_kernels.mlir_air.walk")
    p.add_argument("--runner", required=True, help="the adapter's dotted path, e.g. tiny.verify_adapter")
    p.add_argument("--llms-dir", required=True, help="the checkout's programming_examples/llms")
    p.add_argument("--model", default=None, help="the adapter's MODEL_CHOICES key or a model id / folder")
    p.add_argument("--prompt-style", choices=["instruct", "base"], default="instruct")
    p.add_argument("--prompts-file", default=None)
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--npu-attn", choices=["on", "off"], default="on")
    p.add_argument("--report-dir", default=None, help="default: <llms-dir>/verify/reports (mlir-air's)")
    return p


def read_prompts(path: Path) -> list[str]:
    """verify_runner.py:89-95."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def _import_paths(llms: Path) -> None:
    for p in (str(llms), str(llms / "verify")):  # verify_runner.py:48-51 (llms/verify/ ends up first)
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)


def _reference_walks(adapter, model_name: str, hf_ref: str, config, llms: Path, ids: list[list[int]], n: int):
    """The HF bf16 reference `make verify` uses in this checkout (verify_runner.py:311-338) walked greedily over
    every prompt, and its name. The checkout's own `verify/runners/hf_runner.HfRunner` is walked every time;
    npu-ledger's HfRunner (where the checkout has none: the twin) through `reference_walks`, which reads a walk
    of exactly this folder, toolchain and prompt from $NPU_LEDGER_REFERENCE_CACHE when one is kept there."""
    say = lambda line: print(f"[walk] {line}", flush=True)  # noqa: E731
    if (llms / "verify" / "runners" / "hf_runner.py").is_file():
        from runners.hf_runner import HfRunner  # the checkout's own (llms/verify on sys.path, see _import_paths)

        model = None
        if hasattr(adapter, "build_hf_model"):
            model = adapter.build_hf_model(npu_model_name=model_name, hf_ref_model=hf_ref, config=config)
        ref = HfRunner(model_name=hf_ref, config=config, max_seq=MAX_SEQ, lite_mode=True, model=model)
        say("reference: verify/runners/hf_runner.py HfRunner")
        refs = []
        for i, p in enumerate(ids):
            say(f"prompt {i + 1}/{len(ids)}: reference greedy walk ({n} steps)...")
            refs.append(record(ref, p, n, None))
        return refs, "verify/runners/hf_runner.py HfRunner"

    def build():
        from npu_kernels.model.hf_reference import HfRunner  # heavy (torch, transformers): only when a walk is computed

        return HfRunner(hf_ref)

    name = "npu-ledger npu_kernels.model.hf_reference.HfRunner (the checkout has no verify/runners)"
    say(f"reference: {name}")
    return reference_walks(hf_ref, ids, n, build, say=say), name


def _rank(token: int, top: list[int]) -> int | None:
    return top.index(token) + 1 if token in top else None


def walk_row(i: int, text: str, ids: list[int], g, tok) -> dict[str, Any]:
    """One prompt's walk as the report holds it, from its `TokenGateResult` `g`: every step's forced token, both
    top-k lists, both ranks, KL and log-probs; the first-divergence fields; the perplexity ratio and verdict."""
    steps = []
    for s in range(g.tf_steps):
        top_o, top_r, token = g.tf_topk_ours[s], g.tf_topk_ref[s], g.tf_tokens[s]
        steps.append({"step": s, "token": token, "topk_ours": top_o, "topk_ref": top_r,
                      "rank_ref_in_ours": _rank(token, top_o), "rank_ours_in_ref": _rank(top_o[0], top_r) if top_o else None,
                      "kl": g.tf_kl_per_step[s], "logprob_ours": g.tf_logprob_ours[s], "logprob_ref": g.tf_logprob_ref[s]})
    return {"prompt_idx": i, "prompt": text, "n_prompt_tokens": len(ids), "n_steps": g.n_tokens, "k": g.top_k,
            "steps": steps, "ppl_ratio": g.tf_ppl_ratio, "nan_count": g.nan_count, "tf_passed": bool(g.tf_passed),
            "first_divergence": {"divergence_step": g.divergence_step, "passed": bool(g.first_divergence_passed),
                                 "chosen_ours": g.chosen_ours, "chosen_ref": g.chosen_ref,
                                 "rank_ours_in_ref": g.rank_ours_in_ref, "rank_ref_in_ours": g.rank_ref_in_ours,
                                 "tokens_ours": g.tokens_ours, "tokens_ref": g.tokens_ref},
            "text_ours": tok.decode(g.tokens_ours), "text_ref": tok.decode(g.tokens_ref),
            "thresholds": g.thresholds, "reason": g.reason}


def _write(report: dict[str, Any], out: Path) -> Path:
    """`<out>/teacher_forced_walk_<stamp>.json` (report.py's stamp, verify_runner.py:482-484); a second walk in
    the same second gets a suffix rather than overwriting the first."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, k = out / f"{REPORT_PREFIX}{stamp}.json", 1
    while path.exists():
        path, k = out / f"{REPORT_PREFIX}{stamp}-{k}.json", k + 1
    path.write_text(json.dumps(report, indent=1))
    return path


def _tokenizer(adapter, model_name: str):
    """AutoTokenizer of `model_name`, as mlir-air's verify_runner.py builds it, unless the adapter supplies its own
    (`tokenizer(model_name)`: not in mlir-air's adapter protocol; npu-ledger's stand-in adapters give the stand-in
    scripts' tokenizer, npu_kernels.mlir_air.twin.stand_in.stand_in_tokenizer, which is AutoTokenizer's output without
    transformers' ~5 s import on every `make verify-walk`)."""
    own = getattr(adapter, "tokenizer", None)
    if callable(own):
        return own(model_name)
    from transformers import AutoTokenizer  # heavy: only once the adapter is known to load

    return AutoTokenizer.from_pretrained(model_name)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = _parser().parse_args(argv)
    llms = Path(a.llms_dir).resolve()
    _import_paths(llms)
    adapter = importlib.import_module(a.runner)
    choice = a.model if a.model is not None else adapter.DEFAULT_MODEL
    model_name = adapter.resolve_model(choice)
    hf_ref = adapter.hf_reference(model_name) if hasattr(adapter, "hf_reference") else model_name
    config = adapter.build_config()
    tok = _tokenizer(adapter, model_name)
    pfile = Path(a.prompts_file) if a.prompts_file else llms / "verify" / "prompts" / f"{a.prompt_style}.txt"
    prompts = read_prompts(pfile)
    if a.max_prompts is not None and a.max_prompts > 0:
        prompts = prompts[: a.max_prompts]
    ids = [[int(t) for t in tok.encode(p)][:MAX_SEQ] for p in prompts]
    n = TOKEN_GATE_STEPS
    print(f"[walk] adapter={a.runner}, model={model_name}, hf_ref={hf_ref}: teacher-forced walk, {len(prompts)} "
          f"prompts x {n} steps, k={TOKEN_GATE_TOP_K} (from {pfile.name})", flush=True)
    refs, ref_name = _reference_walks(adapter, model_name, hf_ref, config, llms, ids, n)
    gc.collect()  # the reference is released before the adapter's runner is built (verify_runner.py:380-404)
    print("[walk] building the runner via the adapter...", flush=True)
    ours = adapter.build_runner(model_name=model_name, config=config, max_seq=MAX_SEQ, tokenizer=tok,
                                npu_attn=a.npu_attn == "on", lite_mode=True)
    rows = []
    for i, (text, p, r) in enumerate(zip(prompts, ids, refs)):
        print(f"[walk] prompt {i + 1}/{len(ids)}: runner fed the reference's tokens ({n} steps)...", flush=True)
        o = record(ours, p, n, r.fed)
        if o.logits[0].shape != r.logits[0].shape:
            raise WalkError(f"the runner's logits have shape {o.logits[0].shape}, the reference's "
                            f"{r.logits[0].shape}: the walk compares whole next-token distributions")
        g = token_gate(Replay("ours", o), Replay("reference", r), p, n_tokens=n, k=TOKEN_GATE_TOP_K,
                       prompt_index=i, prompt=text, tokenizer=tok)
        rows.append(walk_row(i, text, p, g, tok))
    failed = sum(1 for r in rows if not r["tf_passed"])
    summary = {"walk_passed": len(rows) - failed, "walk_failed": failed}
    report = {"schema": SCHEMA, "command": shlex.join([sys.executable, "-m", "npu_kernels.mlir_air.walk", *argv]),
              "config": {"runner": a.runner, "model": choice, "model_name": model_name, "hf_ref": hf_ref,
                         "reference": ref_name, "npu_attn": a.npu_attn == "on", "prompts_file": str(pfile),
                         "max_prompts": a.max_prompts, "n_steps": n, "k": TOKEN_GATE_TOP_K, "max_seq": MAX_SEQ},
              "prompts": prompts, "walks": rows, "summary": summary}
    path = _write(report, Path(a.report_dir) if a.report_dir else llms / "verify" / "reports")
    print(f"[walk] JSON: {path}\n[walk] Summary: {summary}", flush=True)
    for r in rows:
        if not r["tf_passed"]:
            print(f"[walk] prompt {r['prompt_idx']} FAIL: {r['reason']}", flush=True)
    print("[walk] FAIL" if failed else "[walk] PASS", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
