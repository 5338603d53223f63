"""Measure the quantisation budget (kernels.model.q4nx_budget) of `ledger quantize` on model folders, both
layouts: the figures kernels/thresholds.py QUANT_BUDGET cites. Usage: python scripts/q4nx_budget.py DIR... """

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from kernels.model.architecture import load_raw_config, resolve
from kernels.model.hf_reference import HfRunner
from kernels.model.q4nx_budget import budget, budget_rows
from kernels.model.q4nx_bundle import write_bundle, write_reference_folder


def main(folders: list[str]) -> None:
    for folder in folders:
        config = resolve(load_raw_config(Path(folder)))
        original = HfRunner(folder)
        for layout in ("llama", "qwen3"):
            with tempfile.TemporaryDirectory() as tmp:
                write_bundle(folder, Path(tmp) / "b.q4nx", config, layout)
                write_reference_folder(Path(tmp) / "b.q4nx", folder, Path(tmp) / "ref", config)
                b = budget(budget_rows(HfRunner(Path(tmp) / "ref"), original, original.tokenizer))
            worst = {k: max((r[k] for r in b["rows"]), default=None) for k in ("kl_mean", "ppl_ratio")}
            print(f"{Path(folder).name:28s} {layout:6s} prompts {b['n_prompts']:2d}  KL mean {b['kl_mean']:.4f} "
                  f"(worst prompt {worst['kl_mean']:.4f})  KL max {b['kl_max']:.3f}  top-5 agreement "
                  f"{b['top5_agreement']:.3f}  PPL ratio max {b['ppl_ratio_max']:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
