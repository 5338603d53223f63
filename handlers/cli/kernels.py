"""`ledger kernel ...`: run one leaf kernel at one shape and judge it, on the executor's kernel runner
(npu_kernels.backends.kernel_runners.make_runner: npu_kernels.numerics.run.run_kernel in process, mlir-air's harness).

    ledger kernel run gemm --shape M=2048,K=2048,N=2048 [--executor emulated|torch|fp32|mlir-air] [--target npu2|npu1]
                      [--contract bf16-out-low] [--tile tile_m=64,tile_n=128] [--seed 0]
                      [--inputs project|harness] [--json]

--inputs harness draws exactly what mlir-air's harness script draws and compares against its reference
(npu_kernels.numerics.harness_inputs), so the figures are comparable with NPU2's printed `[precision]` line.

Prints a short table (or, with --json, the KernelResult fields); exits 1 when the verdict is FAIL. A bad
shape, an unknown kernel or contract, or an illegal tile is one `Error: ...` line on stderr, exit status 1.
"""

from __future__ import annotations

import json
import math

import click

from handlers import results
from handlers.planning import workspace_registry
from npu_kernels.backends.kernel_runners import figure_source
from npu_kernels.provenance import LABELS
from npu_kernels.backends.kernel_runners import EXECUTOR_NAMES, make_runner
from npu_kernels.backends.runner_base import KernelRow
from npu_kernels.numerics.catalog import KERNELS, get_spec
from npu_kernels.numerics.kernels import piece
from npu_kernels.numerics.harness_inputs import HarnessNotReproduced
from npu_kernels.mlir_air.table import HarnessError
from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.numerics.spec import ShapeError, UnknownKernel
from npu_kernels.numerics.tiles import TileRuleViolation
from registry.catalog import shape_key
from registry.fold import HARDWARE
from registry.lookup import PlanningRegistry, gemm_answer, kernel_rows
from registry.render_json import GEMM_JSON
from registry.text import shape_args


def _parse_pairs(text: str, what: str, strings: bool = False) -> dict:
    """"M=2048,K=2048,causal=true" -> {"M": 2048, "K": 2048, "causal": True}; other words only if `strings`."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise click.ClickException(f"bad {what} item {part!r}: expected key=value (e.g. M=2048)")
        low = value.lower()
        if low in ("true", "false"):
            out[key] = low == "true"
        else:
            try:
                out[key] = int(value)
            except ValueError:
                if not strings:
                    raise click.ClickException(
                        f"bad {what} item {part!r}: {value!r} is not an integer or true/false"
                    ) from None
                out[key] = value
    if not out:
        raise click.ClickException(f"empty {what}: expected key=value pairs separated by commas")
    return out


def _fmt(x, spec: str = ".3e") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


@click.group("kernel")
def kernel() -> None:
    """Leaf kernels: run one at a shape on an executor and judge its full output."""


@kernel.command("run")
@click.argument("kernel_name", metavar="KERNEL")
@click.option("--shape", required=True, help="named sizes, e.g. M=2048,K=2048,N=2048")
@click.option("--executor", type=click.Choice(list(EXECUTOR_NAMES)), default="emulated",
              show_default=True, help="mlir-air: run mlir-air's own harness (MLIR_AIR_DIR, under the NPU lock)")
@click.option("--target", type=click.Choice(["npu2", "npu1"]), default="npu2", show_default=True)
@click.option("--contract", default=None, help="e.g. f32-out | bf16-out-high | bf16-out-low (gemm)")
@click.option("--tile", "tile_text", default=None, help="tile overrides, e.g. tile_m=64,tile_n=128")
@click.option("--force-tile", is_flag=True, help="run an illegal tile anyway (fault injection)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--inputs", "input_mode", type=click.Choice(["project", "harness"]), default="project", show_default=True,
              help="project: the project's fixed-seed inputs; harness: mlir-air's harness inputs and reference")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.pass_obj
def run_cmd(app, kernel_name, shape, executor, target, contract, tile_text, force_tile, seed, input_mode,
            as_json) -> None:
    """Run KERNEL at --shape and judge it against its FP32 reference."""
    try:
        spec = get_spec(kernel_name)
        shape_d = _parse_pairs(shape, "shape")
        tile = _parse_pairs(tile_text, "tile", strings=True) if tile_text else None
        row = KernelRow(kernel_name, shape_d, contract=contract, tile=tile, force_tile=force_tile)
        runner = make_runner(executor, target)
        result = runner.measure(row, seed=seed, inputs=input_mode)
    except (UnknownKernel, HarnessNotReproduced) as e:
        raise click.ClickException(str(e)) from None
    except (HarnessError, TranscriptError) as e:  # mlir-air: no command, no lock, a timeout, an unreadable run
        raise click.ClickException(str(e).splitlines()[0]) from None
    except (ShapeError, TileRuleViolation) as e:
        raise click.ClickException(str(e)) from None
    except ValueError as e:  # unknown contract / target
        raise click.ClickException(str(e).splitlines()[0]) from None
    if as_json:
        click.echo(json.dumps(results.kernel_run_json(result), sort_keys=True, default=str))
    else:
        _print_table(result, spec, harness=runner.source == "harness", registry=workspace_registry(app))
    if not result.passed:
        raise SystemExit(1)



def npu2_comparison(kernel: str, shape: dict, contract: str, spec, registry: PlanningRegistry) -> str:
    """The "NPU2 measured" figure a run is compared with: the registry's row for this exact shape and contract
    when one is measured on NPU2 (the ledger's rows, imported or hardware, and MLIR_AIR_DIR's GEMM JSON, through
    registry.lookup), with its cite; else the catalog's figure, saying it was measured at another shape."""
    c = spec.contract(contract)
    best_config = piece(kernel, "best_config")  # GEMM's: the registry's best measured configuration
    if best_config and c.out_dtype == "bf16" and c.tier:
        M, K, N = (int(shape[k]) for k in ("M", "K", "N"))
        choice = registry.best(kernel, {"M": M, "K": K, "N": N}, c.tier)  # the row planning follows, cited
        for _, doc in registry.documents if choice is not None else ():
            try:
                a = gemm_answer(doc, GEMM_JSON["bf16"], M, K, N, "bf16", c.tier)
            except KeyError:
                continue
            if a["method"] == choice.method and a.get("mean_rel_L1") is not None:
                return f"NPU2 measured {a['mean_rel_L1']:.1e} at this exact shape: {choice.cite}"
    elif not best_config:
        try:
            rows = kernel_rows(kernel, registry.data, **shape)
        except (KeyError, ValueError):
            rows = []
        for row in rows:
            ms = [m for m in row.measurements if m.evidence in HARDWARE and m.contract == c.name
                  and m.verdict == "PASS" and m.mean_rel_L1 is not None]
            if ms and dict(row.shape) == dict(shape_key(row.spec, shape)):
                m = ms[-1]
                return (f"NPU2 measured {m.mean_rel_L1:.1e} at this exact shape: ledger seq {m.seq}: {kernel} "
                        f"{shape_args(row.shape)} {m.method} ({m.evidence})")
    npu2 = spec.npu2_figure(contract)
    if npu2 is None:
        return "NPU2: not measured (no registry row of this shape, no published figure of this kernel)"
    return (f"NPU2 measured {npu2.mean_rel_L1:.1e} at {npu2.at}: the catalog's figure at another shape "
            f"(no NPU2 row of {kernel} {shape_args(tuple(shape.items()))} in the registry)")


def _print_table(r, spec, harness: bool, registry: PlanningRegistry | None = None) -> None:
    shape = ",".join(f"{k}={v}" for k, v in r.shape.items())
    comparison = npu2_comparison(r.kernel, dict(r.shape), r.contract, spec,
                                 registry if registry is not None else PlanningRegistry())
    rows = [
        ("kernel", f"{r.kernel} {shape}"),
        ("contract", f"{r.contract}  (rtol {r.rtol:g}, atol {r.atol:g})"),
        ("executor", f"{r.executor} / {r.target}"),
        ("verdict", f"{r.verdict}  ({r.mismatches} of {r.n_elements} elements outside, {r.nan_count} NaN)"),
        ("mean_rel_L1", f"{_fmt(r.mean_rel_L1)}  ({comparison})"),
        ("max_abs / max_rel", f"{_fmt(r.max_abs)} / {_fmt(r.max_rel)}"),
        *_time_rows(r, harness),
        ("tile", " ".join(f"{k}={v}" for k, v in r.tile.items())),
        ("tiles", f"{r.tiles_in_flight} of {r.tiles_target} (herd {'x'.join(map(str, r.herd or []))})"
         + (f": {r.tile_justification}" if r.tile_justification else "")),
    ]
    rows += [("warning", w) for w in r.warnings]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")


def _time_rows(r, harness: bool) -> list[tuple[str, str]]:
    """The timing rows, each saying where its figure comes from (issue #24: never unlabelled); `harness`: the
    run was mlir-air's harness (its printed figures), else an in-process executor's kernel call."""
    if not harness:
        return [("time", f"{r.seconds * 1e3:.2f} ms wall, {figure_source(r.executor)}"
                 + (f"  ({r.gflops:.1f} GFLOP/s on the CPU emulator)" if r.gflops else ""))]
    npu = LABELS[r.provenance_class] if r.provenance_class else figure_source(r.executor)  # what this run ran in
    rows = [("time", f"{r.seconds * 1e3:.2f} ms wall of the harness run (host clock: compile + run)")]
    if r.gflops:
        rows.append(("throughput", f"{r.gflops:.1f} GFLOP/s ({npu})"))
    return rows


@kernel.command("list")
def list_cmd() -> None:
    """The leaf kernels, their shape keys and contracts."""
    for name in KERNELS:
        spec = get_spec(name)
        click.echo(f"{name:<16} {','.join(spec.shape_keys):<40} {' | '.join(spec.contracts)}")


commands = [kernel]
