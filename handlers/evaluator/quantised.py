"""The evaluator's checks of a 4-bit deployment (issue #26), beside the ones every deployment gets.

`quantisation_findings` re-derives what Phase 0 recorded in QuantisedBundleRead from the files themselves: the
bundle's sha256, the sha256 of the dequantised tensors (re-dequantised from the bundle, not read from the
ledger), that the reference folder's model.safetensors holds exactly those tensors and its model.q4nx is the
bundle. `check_budget` (pure) re-derives a QuantisationBudgetMeasured's aggregate from its per-prompt rows and
re-judges it against the stricter of its recorded thresholds and `npu_kernels.thresholds.QUANT_BUDGET`.
"""

from __future__ import annotations

from pathlib import Path

from handlers.evaluator.audit import Finding
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.digest import file_sha256
from npu_kernels.model.q4nx import named_bytes_sha256, read_bundle
from npu_kernels.model.q4nx_bundle import BUNDLE_FILE, REFERENCE_FILE, decode_reference_sha256, reference_sha256
from npu_kernels.model.q4nx_device import DECODE_FILE
from npu_kernels.thresholds import FIGURE_RTOL, quant_budget_problems, strictest_quant_budget
from ledger.record import RecordedEvent
from statemachine.state import DeploymentState


def check_budget(rec: RecordedEvent) -> list[str]:
    p = rec.payload
    rows = p.get("rows") or []
    steps = sum(r.get("steps", 0) for r in rows)
    derived = {
        "kl_max": max((r["kl_max"] for r in rows if r.get("kl_max") is not None), default=None),
        "kl_mean": sum(r["kl_mean"] * r["steps"] for r in rows if r.get("kl_mean") is not None) / steps if steps else None,
        "top5_agreement": sum(r["top5_agreement"] * r["steps"] for r in rows
                              if r.get("top5_agreement") is not None) / steps if steps else None,
        "ppl_ratio_max": max((r["ppl_ratio"] for r in rows if r.get("ppl_ratio") is not None), default=None),
    }
    problems = []
    for key, value in derived.items():
        got = p.get(key)
        if value is None or got is None or abs(got - value) > FIGURE_RTOL * max(1.0, abs(value)) + 1e-12:
            problems.append(f"quantisation {key} {got} is not what its rows give ({value})")
    judged = quant_budget_problems(derived, strictest_quant_budget(p.get("thresholds")))
    if p.get("passed") and judged:
        problems.append(f"budget recorded as passed, but {judged[0]}")
    return problems


def _tensors_sha256(path: Path) -> str:
    """sha256 of a safetensors file's tensors (names and bytes, sorted), as QuantisedBundleRead hashes them."""
    b = read_bundle(path)
    return named_bytes_sha256({name: bytes(b.raw(name)) for name in b.names})


def quantisation_findings(state: DeploymentState, events: list[RecordedEvent], cfg: ModelConfig) -> list[Finding]:
    if not state.quantisation:
        return []
    reads = [e for e in events if e.type == "QuantisedBundleRead"]
    if not reads:
        return [Finding("error", None, "quantisation", "a 4-bit deployment without QuantisedBundleRead")]
    rec = reads[-1]
    p = rec.payload
    checks = []
    try:
        bundle = Path(p["bundle"])
        checks = [
            ("the bundle's sha256", file_sha256(bundle), p["bundle_sha256"]),
            ("the reference folder's model.q4nx", file_sha256(Path(state.model_path) / BUNDLE_FILE), p["bundle_sha256"]),
            ("the dequantised tensors re-derived from the bundle", reference_sha256(bundle, cfg), p["dequantised_sha256"]),
            ("the reference folder's model.safetensors", _tensors_sha256(Path(state.model_path) / REFERENCE_FILE),
             p["dequantised_sha256"]),
        ]
        if p.get("style", "host") == "device":
            checks += [
                ("the decode's re-quantised tensors re-derived from the bundle", decode_reference_sha256(bundle, cfg),
                 p["decode_sha256"]),
                ("the reference folder's decode.requant", _tensors_sha256(Path(state.model_path) / DECODE_FILE),
                 p["decode_sha256"]),
            ]
    except Exception as e:  # noqa: BLE001 - an unreadable bundle is a finding, not a crash
        return [Finding("error", rec.seq, "quantisation", f"cannot re-derive the dequantised reference: {e}")]
    return [Finding("error", rec.seq, "quantisation", f"{what} is {now[:12]}, Phase 0 recorded {recorded[:12]}")
            for what, now, recorded in checks if now != recorded]
