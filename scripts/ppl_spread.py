"""The token gate's perplexity ratio and KL mean, per prompt of the full sets, for two pairs on a model folder:
HF transformers in FP32 vs HF in bf16 (the reference's own precision spread) and the emulated NPU2 pipeline vs HF
in bf16 (what Phase 3 judges): the figures the note on TF_PPL_RATIO_MAX in npu_kernels/thresholds.py cites.
Usage: python scripts/ppl_spread.py DIR... (a tiny test model: python -c "from tests.models import
build_tiny_model; build_tiny_model('llama', 'tiny')")."""

from __future__ import annotations

import sys

import numpy as np

from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.compare import token_gate
from npu_kernels.model.hf_reference import HfRunner, load_tokenizer
from npu_kernels.model.prompts import prompts_for


class Fp32Runner(HfRunner):
    """The HF reference with its weights and arithmetic in FP32 (loaded in bf16: the same weights)."""

    name = "hf_fp32"

    def __init__(self, folder) -> None:
        super().__init__(folder)
        self.model.float()


def main(folders: list[str]) -> None:
    print("folder  prompt  | fp32 vs bf16: PPL ratio  KL mean | emulated vs bf16: PPL ratio  KL mean  gate")
    for folder in folders:
        ref, fp32 = HfRunner(folder), Fp32Runner(folder)
        emulated = InProcessBackend(folder, resolve(load_raw_config(folder)), "emulated").pipeline
        for p in prompts_for(load_tokenizer(folder), full=True):
            a, b = (token_gate(ours, ref, p.tokens, prompt_index=p.index) for ours in (fp32, emulated))
            verdict = "PASS" if b.passed else "FAIL"
            print(f"{folder}  {p.kind} {p.index}  | {a.tf_ppl_ratio:.4f}  {np.mean(a.tf_kl_per_step):.4f} | "
                  f"{b.tf_ppl_ratio:.4f}  {np.mean(b.tf_kl_per_step):.4f}  {verdict}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
