"""`make decode-gate` of a stand-in short-convolution model directory (`ledger scaffold NAME --stand-in emulated`).

mlir-air checks LFM2's carried ShortConv state with lfm2_1_2b_q4nx's decode gate (Makefile at ff1efdb0, the
decode-gate target; lfm2_1_2b_q4nx_decode_gate.py at 11cad40a): the tokens of `--tokens` as one sequence (`--seq`),
each token's logits against a reference (cosine, both top-1s) and, after each, every ShortConv layer's carried state
read back against the reference's (relative L2 per state row, the larger of the two per layer), the drift one layer
adds per model layer bounded by `--state-rel`. This script prints only the lines that script prints
(npu_kernels.mlir_air.decode_gate_report lists them), its figures computed here:

  ours        npu-ledger's emulated pipeline on the model folder (npu_kernels.mlir_air.twin.stand_in.StandInRunner:
              the Makefile's NPU_LEDGER_SWITCHES / NPU_LEDGER_FAULTS in force), its state `conv_state(layer)`
  reference   HF transformers on the same folder (npu_kernels.model.hf_reference.HfRunner), its conv cache's newest
              taps - 1 rows, where mlir-air's is a NumPy forward of its own 4-bit weights

Where the stand-in differs, and says so: the first token of a sequence runs as a one-token prefill (zero state, as
mlir-air's first decode step has), the others as decode steps carrying the state and the KV cache; attention runs in
full (mlir-air's gate zeroes the q-norm weight so attention reduces to V / ATTN_L), so the header line names no
ATTN_L. A token id past the model's vocabulary is taken modulo its size (mlir-air's default tokens are LFM2-1.2B's,
vocabulary 65536).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.compare import cosine
from npu_kernels.thresholds import DECODE_GATE_THRESHOLDS, state_drift_increments

DEFAULT_TOKENS = "1000,42,7,15000,65000"  # lfm2_1_2b_q4nx_decode_gate.py at 11cad40a, main(): --tokens


def _rel_l2(ours: np.ndarray, ref: np.ndarray) -> list[float]:
    """Per state row (oldest first) the relative L2 of ours against the reference; a row both hold as zeros is not
    compared (the older row after the first token)."""
    out = []
    for o, r in zip(np.asarray(ours, np.float64), np.asarray(ref, np.float64)):
        no, nr = float(np.linalg.norm(o)), float(np.linalg.norm(r))
        if no < 1e-20 and nr < 1e-20:
            continue
        out.append(float(np.linalg.norm(o - r) / (nr + 1e-30)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="decode_gate", description="short-convolution decode gate (npu-ledger stand-in)")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--dir", default=".")
    p.add_argument("--tokens", default=DEFAULT_TOKENS)
    p.add_argument("--cos-min", type=float, default=DECODE_GATE_THRESHOLDS["logits_cosine"])
    p.add_argument("--seq", action="store_true")
    p.add_argument("--state-rel", type=float, default=DECODE_GATE_THRESHOLDS["state_rel_per_layer"])
    p.add_argument("--state-verbose", action="store_true")
    a = p.parse_args(argv)

    from npu_kernels.backends.in_process import hf_reference
    from npu_kernels.mlir_air.twin.stand_in import StandInRunner, settings

    model_path = settings(a.model_dir)["model_path"]
    cfg = resolve(load_raw_config(model_path))
    conv_layers = list(cfg.arch.conv_layers())
    ours, ref = StandInRunner(model_path).pipeline, hf_reference(model_path)
    tokens = [int(t) % cfg.vocab_size for t in a.tokens.split(",") if t.strip()]
    print(f"{a.dir}: layers={cfg.n_layers}  short-convolution layers={','.join(map(str, conv_layers))}  "
          "(npu-ledger stand-in: emulated pipeline against HF transformers; attention not reduced to V/ATTN_L)")
    worst, n_ok, worst_rel, n_slots, n_bad = 1.0, 0, 0.0, 0, 0
    for i, tok in enumerate(tokens):
        if i == 0 or not a.seq:  # a sequence's first token: zero state; without --seq every token starts afresh
            mine, theirs = ours.prefill([tok]).logits_at_pred, ref.prefill([tok]).logits_at_pred
        else:
            mine, theirs = ours.decode_step(tok, i).lm_head_logits, ref.decode_step(tok, i).lm_head_logits
        mine, theirs = np.asarray(mine, np.float32), np.asarray(theirs, np.float32)
        n_nan = int(np.isnan(mine).sum())
        if n_nan:
            print(f"tok {tok:6d}: UNUSABLE -- 0 of {mine.size} logit words never written (poison), {n_nan} NaN")
        cos = float("nan") if n_nan else cosine(mine, theirs)
        worst = float("nan") if np.isnan(cos) or np.isnan(worst) else min(worst, cos)
        n_ok += bool(cos >= a.cos_min)
        agree = int(mine.argmax()) == int(theirs.argmax())
        print(f"tok {tok:6d}: cos={cos:.6f}  dev_top1={int(mine.argmax()):6d}  ref_top1={int(theirs.argmax()):6d}  "
              f"top1={'y' if agree else 'n'}")
        if not a.seq:
            continue
        per_layer = {}
        for layer in conv_layers:
            rows = _rel_l2(ours.conv_state(layer), ref.conv_state(layer))
            n_slots += len(rows)
            if rows:
                per_layer[layer] = max(rows)
        hi = max(per_layer.values(), default=0.0)
        for layer, prev, this, span, inc in state_drift_increments(list(per_layer.items())):
            if inc > a.state_rel:
                n_bad += 1
                print(f"          layer {layer}: state drift {prev:.4f} -> {this:.4f} over {span} model layer(s) = "
                      f"{inc:.4f}/layer (> {a.state_rel})")
        worst_rel = max(worst_rel, hi)
        print(f"          ShortConv state read-back: max rel_l2 {hi:.4f}")
        if a.state_verbose:
            print("            per layer: " + "  ".join(f"L{k}:{v:.3f}" for k, v in sorted(per_layer.items())))
    print(f"\nmin cosine {worst:.6f} over {len(tokens)} tokens (gate >= {a.cos_min})")
    ok = n_ok == len(tokens)
    if a.seq:
        print(f"state slots checked {n_slots}, max rel_l2 {worst_rel:.4f}; {n_bad} layer(s) adding more than "
              f"{a.state_rel} of drift per model layer (gate: 0)")
        ok = ok and n_slots > 0 and n_bad == 0
    print("HYBRID NUMERICS PASS" if ok else "HYBRID NUMERICS FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
