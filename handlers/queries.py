"""Read verbs whose work used to sit inside a click command, for the CLI and the MCP server to share.

  model_target(app, target, platform)   NAME|CONFIG -> (ModelConfig, target) for `plan`
  predict_config(app, target)           NAME|CONFIG -> ModelConfig for `predict` (scope-checked)
  context_window(app, target)           NAME|CONFIG -> its config.json's max_position_embeddings (`predict --curve`)
  curve_result                           `predict --curve --json`'s value (and the PNG), for the CLI and MCP (handlers.predicting: the point)
  plan_result(app, target, ...)         `plan`'s rows
  registry_lookup(kernel, dims, ...)    the best measured config (GEMM's), or the registry rows of a kernel
  verify_chain(app, checkpoint)         `ledger verify`'s chain check and the checkpoint kept

A CONFIG argument never opens the ledger (`App.ledger` is opened on first use): `ledger plan config.json` in an
empty folder creates no database.

Nothing here writes to the ledger. `TargetError` is raised for a NAME|CONFIG that is neither; the CLI prints
it as click's `Error: ...` line (as before this module existed), the MCP server as its tool error.
Imports: handlers.bootstrap, handlers.uow, handlers.gates (GateRun), kernels, ledger, registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from handlers import results
from handlers.bootstrap import App
from handlers.gates import GateRun
from handlers.uow import DeploymentError, DeploymentUnit
from npu_kernels.model import architecture
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.plan import DEFAULT_SEQ
from handlers.planning import deployment_plan, deployment_weights
from npu_kernels.perf.curve import context_window as curve_window
from npu_kernels.perf.curve import curve_png, npu2_curve
from npu_kernels.perf.dispatch import normalize_switches
from npu_kernels.perf.q4nx import matching_anchor, predict_weights
from ledger import Checkpoint
from ledger.checkpoints import ChainReport, check_chain
from ledger.record import RecordedEvent
from npu_kernels.numerics.kernels import piece
from registry.catalog import canonical_kernel
from registry.lookup import gemm_config, gemm_config_planned, kernel_rows


class TargetError(ValueError):
    """Raised when a NAME|CONFIG argument is neither a model config (in scope) nor a deployment with a
    resolved config."""


def _path_like(target: str) -> bool:
    """Whether `target` was meant as a file: a path separator, a `~` / `.` start or a `.json` end."""
    return "/" in target or "\\" in target or target.startswith(("~", ".")) or target.endswith(".json")


def _deployment_state(app: App, target: str):
    """Deployment `target`'s folded state; a `target` written as a path that is neither a file nor a deployment
    says that the file does not exist (not only that no deployment has that name)."""
    try:
        return DeploymentUnit(app.ledger, target).state
    except DeploymentError:
        if _path_like(target):
            raise TargetError(f"{target}: no such config.json or HF folder (nor a deployment of that name)") from None
        raise


def model_target(app: App, target: str, platform: str | None = None) -> tuple[ModelConfig, str]:
    """The config `ledger plan` plans and the NPU target: from a config.json / HF folder at `target`
    (platform default npu2), else from deployment `target`'s folded ConfigResolved (its own target)."""
    if Path(target).expanduser().exists():  # refused as `predict` refuses it: the same one line (issue 48 item 5)
        return predict_config(app, target), platform or "npu2"
    state = _deployment_state(app, target)
    if not state.config:
        raise TargetError(f"{target} has no resolved config (out of scope?)")
    return GateRun(state=state, workspace=app.workspace).config, platform or state.target


def deployment_config(ledger, name: str) -> ModelConfig:
    """The ModelConfig of deployment NAME: its folded ConfigResolved (no model folder is read)."""
    state = DeploymentUnit(ledger, name).state
    if not state.config:
        raise TargetError(f"{name!r} is neither a config.json / HF folder nor a deployment with a resolved config")
    return ModelConfig(**{k: v for k, v in state.config.items() if k in ModelConfig.__dataclass_fields__})


def predict_config(app: App, target: str) -> ModelConfig:
    """What `ledger predict` models: a config.json / HF folder at `target` (refused when out of scope), else
    deployment `target`."""
    p = Path(target).expanduser()
    if not p.exists():
        _deployment_state(app, target)  # a missing file is named as one
        return deployment_config(app.ledger, target)
    raw = architecture.load_raw_config(p)
    assessment = architecture.assess(raw)
    if not assessment.in_scope:
        raise TargetError(f"out of scope: {assessment.reasons[0]}")
    return architecture.resolve(raw)


def context_window(app: App, target: str) -> int | None:
    """The model's trained context (`max_position_embeddings` of its config.json) for `ledger predict --curve`:
    from `target` when it is a config.json / HF folder, else from deployment `target`'s model folder; None when
    neither says (the curve then has no context-window bound)."""
    p = Path(target).expanduser()
    if not p.exists():
        folder = DeploymentUnit(app.ledger, target).state.model_path
        if not folder:
            return None
        p = Path(folder)
    return curve_window(p)


def registry_lookup(kernel: str, dims: dict[str, Any], *, events: Callable[[], Sequence[RecordedEvent]],
                    registry_dir: Path, output_dtype: str = "bf16", precision: str | None = None) -> tuple[str, Any]:
    """("best", the best measured config) for a kernel whose registry keeps one (`best_config`: GEMM's, dims M,
    K, N; from the projected JSON in `registry_dir`),
    else ("rows", the matching `registry.lookup.ShapeRow`s from `events()`). Raises what `gemm_config` and
    `kernel_rows` raise: KeyError naming what was measured, ValueError, FileNotFoundError."""
    if piece(canonical_kernel(kernel), "best_config"):
        try:
            M, K, N = int(dims["M"]), int(dims["K"]), int(dims["N"])
        except KeyError as e:
            raise KeyError("gemm needs M K N (or M=.. K=.. N=..)") from e
        if precision is None:  # the tier `ledger plan` takes for the shape (registry.lookup.planned_tiers)
            return "best", gemm_config_planned(M, K, N, output_dtype=output_dtype, registry_dir=registry_dir)
        return "best", gemm_config(M, K, N, output_dtype=output_dtype, precision=precision, registry_dir=registry_dir)
    return "rows", kernel_rows(kernel, events(), **dims)


def verify_chain(app: App, checkpoint: Checkpoint | None) -> tuple[ChainReport, str | None]:
    """`ledger verify`: the hash chain and triggers checked against `checkpoint` (`--against`, parsed by
    `ledger.Checkpoint.parse`) and every checkpoint the workspace keeps, on a read-only ledger; then the head
    kept when the chain is intact. Returns the report and the warning to print when the head could not be kept."""
    app.read_only = True
    report = check_chain(app.ledger, checkpoint, app.checkpoint_record)
    return report, app.keep_checkpoint(report.head) if report.ok else None


def curve_name(target: str) -> str:
    """The name a curve is drawn under: a config file's stem, a folder's or deployment's name."""
    return Path(target).stem if Path(target).is_file() else Path(target).name


def curve_result(app: App, target: str, *, switches: str | None = None, weights: str = "bf16",
                 host_bytes: int | None = None, png: str | None = None, where: Path = Path(".")):
    """`ledger predict NAME|CONFIG --curve --json`: (its JSON value, the curve) with the PNG written to `png`
    (default `<name>_curve.png`; a relative path lies in `where`: the CLI's current folder, the MCP server's
    workspace). Raises TargetError, ValueError (switches, weights), OSError (the PNG)."""
    config = predict_config(app, target)
    sw = normalize_switches(switches)
    name = curve_name(target)
    c = npu2_curve(config, sw, sw, max_positions=context_window(app, target), host_bytes=host_bytes, weights=weights)
    shown_as = png or f"{name}_curve.png"
    try:
        (where / shown_as).write_bytes(curve_png(c, f"{name}: {c['label']}"))
    except OSError as e:
        raise OSError(f"cannot write the curve's PNG {shown_as}: {e.strerror or e}") from None
    return results.curve_json(c, shown_as), c


def plan_result(app: App, target: str, platform: str | None = None, weights: str | None = None,
                seq: int = DEFAULT_SEQ) -> list:
    """`ledger plan NAME|CONFIG`'s rows: registry first; a deployment planned without its own rows, with its own
    weights unless `weights` says (as Phase 1 plans it), a CONFIG with bf16 unless `weights` says; the prefill rows
    at padded length `seq`."""
    app.read_only = True
    cfg, tgt = model_target(app, target, platform)
    own = None if Path(target).expanduser().exists() else target
    weights = weights or (deployment_weights(DeploymentUnit(app.ledger, own).state) if own else "bf16")
    return deployment_plan(cfg, tgt, app.ledger, own, weights=weights, seq=seq)[0]
