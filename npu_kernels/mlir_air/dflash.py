"""Reading mlir-air's DFlash exactness run: `dflash_acceptance_device.py --exactness` of
programming_examples/llms/qwen3_4b_q4nx (@43e773e88268a33a5e2e835cc91a39e0387b7119), the speculative loop of
`dflash_loop.py` on NPU2 with each prompt re-run with the drafter off.

The lines read, as that file prints them (line numbers at that commit):
  :174-178  one per prompt: "  prompt   0 (len  123):   9 blocks,  32 tokens, mean 3.556   exact for 32/32"; the
            "exact for SAME/K" tail (:164-172) only with --exactness: SAME is the first position where the
            speculative stream and the drafter-off stream differ (K when they never do), K the shorter length
  :207      "[acceptance] N blocks over P prompts"
  :220      "  mean tokens per verify dispatch : M +/- S  (1 s.e.; ...)", S the sample standard deviation of the
            per-block lengths over sqrt(N) (:195; "nan" with one block)
  :240-245  "  exactness: E/P prompts reproduce the non-speculative stream" (only with --exactness)

`parse_exactness` returns the figures and the verdict re-derived from the per-prompt lines (exact only if every
prompt's SAME equals its K and the summary agrees); anything missing or contradictory is a `DflashOutputError` in
one line. The mlir-air backend runs it as the model directory's `make dflash-exactness`
(npu_kernels.backends.mlir_air.MlirAirBackend.speculation_check; `ledger scaffold` writes the target for a deployment
with a drafter, and on a stand-in npu_kernels.mlir_air.twin.dflash prints these lines from the emulated loop).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

SCRIPT = "dflash_acceptance_device.py"
COMMIT = "43e773e88268a33a5e2e835cc91a39e0387b7119"

_PROMPT = re.compile(r"^\s*prompt\s+(\d+)\s+\(len\s+(\d+)\):\s+(\d+) blocks,\s+(\d+) tokens, mean\s+(\S+)"
                     r"(?:\s+exact for (\d+)/(\d+))?\s*$")
_BLOCKS = re.compile(r"^\[acceptance\] (\d+) blocks over (\d+) prompts\s*$")
_MEAN = re.compile(r"^\s*mean tokens per verify dispatch\s*:\s*(\S+) \+/- (\S+)")
_EXACT = re.compile(r"^\s*exactness: (\d+)/(\d+) prompts reproduce the non-speculative stream\s*$")


class DflashOutputError(ValueError):
    """The output is not a complete `--exactness` run of mlir-air's DFlash acceptance script."""


@dataclass(frozen=True)
class DflashPrompt:
    index: int
    prompt_len: int
    blocks: int
    tokens: int
    mean: float
    same: int  # the first position where the two streams differ (== compared when they never do)
    compared: int


@dataclass(frozen=True)
class DflashExactness:
    prompts: list[DflashPrompt] = field(default_factory=list)
    blocks: int = 0
    acceptance_mean: float = math.nan
    acceptance_sem: float = math.nan  # nan with one block, as the script prints it
    exact_prompts: int = 0

    @property
    def passed(self) -> bool:
        """Every prompt's speculative stream reproduces the drafter-off one (re-derived per prompt)."""
        return bool(self.prompts) and all(p.same == p.compared for p in self.prompts)


def parse_exactness(text: str) -> DflashExactness:
    """The figures of one `dflash_acceptance_device.py --exactness` output, or DflashOutputError in one line."""
    prompts, blocks, mean, sem, exact = [], None, None, None, None
    for line in text.splitlines():
        if m := _PROMPT.match(line):
            if m.group(6) is None:
                raise DflashOutputError(f"prompt {m.group(1)} has no 'exact for' tail: the run was not --exactness")
            prompts.append(DflashPrompt(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                                        float(m.group(5)), int(m.group(6)), int(m.group(7))))
        elif m := _BLOCKS.match(line):
            blocks, n_prompts = int(m.group(1)), int(m.group(2))
        elif m := _MEAN.match(line):
            mean, sem = float(m.group(1)), float(m.group(2))
        elif m := _EXACT.match(line):
            exact, n_exact = int(m.group(1)), int(m.group(2))
    if not prompts:
        raise DflashOutputError(f"no per-prompt line of {SCRIPT}")
    if blocks is None or mean is None or exact is None:
        missing = [w for w, v in (("blocks", blocks), ("mean tokens per verify dispatch", mean),
                                  ("exactness", exact)) if v is None]
        raise DflashOutputError(f"{SCRIPT} output without its {', '.join(missing)} summary line (a run cut short?)")
    if n_prompts != len(prompts) or n_exact != len(prompts) or blocks != sum(p.blocks for p in prompts):
        raise DflashOutputError(f"the summary ({blocks} blocks, {n_prompts} / {n_exact} prompts) is not its "
                                f"{len(prompts)} prompt lines' ({sum(p.blocks for p in prompts)} blocks)")
    derived = sum(p.same == p.compared for p in prompts)
    if derived != exact:
        raise DflashOutputError(f"the summary says {exact}/{len(prompts)} prompts exact, the prompt lines {derived}")
    return DflashExactness(prompts, blocks, mean, sem, exact)
