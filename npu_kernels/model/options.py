"""What a decoder pipeline may be asked to do: the optimisation switches and the named test faults.

`SWITCHES` are the issue #6 switches; each one changes how `npu_kernels.model.pipeline` dispatches the work,
never the numbers (tests assert bit-identical outputs):
  weight_residency  weights go to the executor with a `static_key` so it converts/quantises them once;
                    RoPE tables are cached across calls.
  fusion            Q/K/V as one GEMM (concatenated weights), Q and K through one RoPE call, gate/up as
                    one GEMM: fewer dispatches and passes over the activations.
  seq_first         activations stay (seq, heads, D) end to end: RoPE/q-k-norm rows and the attention
                    inputs are views, the KV cache is seq-first. The baseline copies to head-major before
                    RoPE and attention, like a pipeline whose kernels disagree on layout.
`FAULTS` names the test faults a gate drill or a test may declare, with one line
each (`FAULT_HELP`); they run only in `npu_kernels.model.faults.FaultyPipeline`, never in the production pipeline.
A `PipelineOptions` is recorded with every measurement (`to_dict`), faults included.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from npu_kernels.model.features import registry

SWITCHES = ("weight_residency", "fusion", "seq_first")
FAULT_HELP = {
    "rope_interleaved": "RoPE rotates interleaved pairs (x[2i], x[2i+1]) instead of HF's half-split halves",
    "kv_cache_off_by_one": "decode writes each step's K/V one cache position late",
    "down_bf16_accumulate": "the down projection keeps its partial sum in bf16 between K chunks of 32",
    "stale_decode_buffer": "a decode step reads the previous step's O-projection output (a stale buffer)",
    "lm_head_partition_offset": "decode's first LM-head partition streams its rows one row late",
    "kv_head_group_mismap": "query head h attends with K/V head h % Hkv instead of h // (H / Hkv)",
    "q4nx_group_scale_shift": "a 4-bit deployment's host dequantisation uses group g+1's scale for group g",
    "norm_fold_missing": "norm weights stored as w are applied as w, not 1+w (the fold left out at load)",
    # and the drills of each model feature, declared by its module (npu_kernels.model.features)
    **{name: line for feature in registry().values() for name, line in feature.faults.items()},
}
FAULTS = frozenset(FAULT_HELP)
# the speculative loop's test faults (npu_kernels.model.speculative; drills of Phase 5's speculation gate), declared
# with a drafter (`DeploymentRequested.drafter["faults"]`, tests only), run by npu_kernels.model.faults
SPEC_FAULT_HELP = {
    "spec_unverified_accept": "every drafted token is committed without the target's verification",
    "spec_accept_off_by_one": "the accepted prefix runs one token past the first mismatch (the rejected draft kept)",
}
SPEC_FAULTS = frozenset(SPEC_FAULT_HELP)


@dataclass(frozen=True)
class PipelineOptions:
    weight_residency: bool = False
    fusion: bool = False
    seq_first: bool = False
    prefill_len: int | None = None  # pad the prompt to this many positions (a compiled seq); None: no padding
    pad_token: int = 0
    faults: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", frozenset(self.faults))
        unknown = self.faults - FAULTS
        if unknown:
            raise ValueError(f"unknown pipeline faults {sorted(unknown)}; known: {sorted(FAULTS)}")

    @classmethod
    def optimised(cls, **kw: Any) -> "PipelineOptions":
        """Every optimisation switch on."""
        return cls(**{s: True for s in SWITCHES}, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["faults"] = sorted(self.faults)
        return d
