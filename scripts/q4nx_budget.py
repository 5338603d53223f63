"""Measure the quantisation budget (npu_kernels.model.q4nx_budget) of `ledger quantize` on model folders, both
layouts: the figures npu_kernels/thresholds.py QUANT_BUDGET cites. Usage: python scripts/q4nx_budget.py [--faults] DIR... """

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.q4nx_budget import budget, budget_rows
from npu_kernels.model.q4nx_bundle import write_bundle, write_reference_folder


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




def faulty(folders: list[str]) -> None:
    """The same budget for two broken dequantisations (what the budget must catch): the other family's formula
    on the bundle's fields, and group g+1's scale for group g (npu_kernels.model.faults.bundle_dequantiser)."""
    from npu_kernels.model.faults import bundle_dequantiser
    from npu_kernels.model.q4nx import dequantise, read_bundle, write_container
    from npu_kernels.model.q4nx_bundle import dequantised_tensors, reference_bytes

    wrong_formula = lambda c, s, m, layout: dequantise(c, s, m, "qwen3" if layout == "llama" else "llama")
    for folder in folders:
        config = resolve(load_raw_config(Path(folder)))
        original = HfRunner(folder)
        for label, dq in (("other family's formula", wrong_formula),
                          ("group g+1's scale", bundle_dequantiser(frozenset({"q4nx_group_scale_shift"})))):
            with tempfile.TemporaryDirectory() as tmp:
                write_bundle(folder, Path(tmp) / "b.q4nx", config, "llama")
                write_reference_folder(Path(tmp) / "b.q4nx", folder, Path(tmp) / "ref", config)
                tensors = reference_bytes(dequantised_tensors(read_bundle(Path(tmp) / "b.q4nx"), config, dq))
                write_container(Path(tmp) / "ref" / "model.safetensors", tensors, {"format": "pt"})
                b = budget(budget_rows(HfRunner(Path(tmp) / "ref"), original, original.tokenizer))
            print(f"{Path(folder).name:28s} FAULT {label:24s} KL mean {b['kl_mean']:.4f}  KL max {b['kl_max']:.3f}  "
                  f"top-5 agreement {b['top5_agreement']:.3f}  PPL ratio max {b['ppl_ratio_max']:.3f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--faults"]:
        faulty(sys.argv[2:])
    else:
        main(sys.argv[1:])
