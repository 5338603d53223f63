"""`ledger registry ...`: look up measured configs; import mlir-air registry files and build/check projections
(`registry import` / `build`: rows of handlers.verbs).

The ledger comes from `ctx.obj["open_ledger"]()` (the main CLI's App provides it); the default output
directory is `ctx.obj["workspace"]` (else the current directory). Commands stay thin: parse, call
`registry.lookup` / `handlers.registry_ops`, print, map errors to exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from handlers.cli.verbs import group_commands
from handlers.results import registry_row_json
from registry.catalog import canonical_kernel
from registry.fold import not_npu2_mark
from registry.lookup import CONTRACTS, gemm_config, gemm_config_planned, kernel_rows
from registry.render_markdown import STATUS_GLYPH, tile_text
from registry.text import num, sci, shape_args


def _obj(ctx: click.Context, key: str, default=None):
    try:
        return ctx.obj[key]
    except (KeyError, TypeError):
        return default


def _workspace(ctx: click.Context) -> Path:
    ws = _obj(ctx, "workspace")
    return Path(ws) if ws is not None else Path.cwd()


def _ledger(ctx: click.Context, read_only: bool = False):
    app = _obj(ctx, "app")
    if read_only and app is not None:
        app.read_only = True  # a SQLite ledger opened so that nothing can write to it
    opener = _obj(ctx, "open_ledger")
    if opener is None:
        raise click.ClickException("no ledger configured (run through the `ledger` command)")
    return opener()


def _parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _parse_dims(args: tuple[str, ...]) -> dict:
    dims = {}
    for arg in args:
        for part in arg.split(","):
            if "=" not in part:
                raise click.BadParameter(f"expected k=v, got {part!r}", param_hint="ARGS")
            k, v = part.split("=", 1)
            dims[k.strip()] = _parse_value(v.strip())
    return dims


@click.group("registry")
def registry() -> None:
    """The kernel registry: lookups, mlir-air imports, projections."""


@registry.command("lookup")
@click.argument("kernel")
@click.argument("args", nargs=-1)
@click.option("--dtype", "output_dtype", default="bf16", show_default=True, help="GEMM output dtype: bf16 or f32")
@click.option("--precision", type=click.Choice(["high", "low"]), default=None,
              help="GEMM precision tier (default: the tier `ledger plan` takes for the shape)")
@click.option("--contract", type=click.Choice(sorted(CONTRACTS)), default=None,
              help="GEMM contract, in place of --dtype and --precision (f32-out, bf16-out-high, bf16-out-low)")
@click.option("--registry-dir", type=click.Path(file_okay=False), help="details/ dir holding the GEMM JSON")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def lookup_cmd(ctx, kernel, args, output_dtype, precision, contract, registry_dir, as_json) -> None:
    """`lookup gemm M K N` (from the GEMM JSON) or `lookup KERNEL k=v ...` (from the ledger)."""
    if contract:
        output_dtype, precision = CONTRACTS[contract]
    if canonical_kernel(kernel) == "gemm":
        if len(args) == 3 and all("=" not in a for a in args):
            try:
                M, K, N = (int(a) for a in args)
            except ValueError as e:
                raise click.BadParameter("M K N must be integers", param_hint="ARGS") from e
        else:
            dims = _parse_dims(args)
            try:
                M, K, N = int(dims["M"]), int(dims["K"]), int(dims["N"])
            except KeyError as e:
                raise click.BadParameter("gemm needs M K N (or M=.. K=.. N=..)", param_hint="ARGS") from e
        directory = Path(registry_dir) if registry_dir else _workspace(ctx) / "kernel_registry" / "details"
        try:
            answer = (gemm_config(M, K, N, output_dtype=output_dtype, precision=precision, registry_dir=directory)
                      if precision else gemm_config_planned(M, K, N, output_dtype=output_dtype, registry_dir=directory))
        except KeyError as e:
            raise click.ClickException(e.args[0]) from e
        except (ValueError, FileNotFoundError) as e:
            raise click.ClickException(str(e)) from e
        if as_json:
            click.echo(json.dumps(answer, indent=2))
        else:
            herd = f"  herd {'x'.join(map(str, answer['herd']))}" if "herd" in answer else ""
            click.echo(f"{M}x{K}x{N} out={output_dtype} {precision or answer['precision']}: method {answer['method']}  tile "
                       f"{tile_text(answer['tile'])}  gflops {num(answer['gflops'])}  mean_rel_L1 "
                       f"{sci(answer['mean_rel_L1'])}{herd}")
        return
    dims = _parse_dims(args)
    events = _ledger(ctx, read_only=True).read_all()
    try:
        rows = kernel_rows(kernel, events, **dims)
    except KeyError as e:
        raise click.ClickException(e.args[0]) from e
    if as_json:
        click.echo(json.dumps([registry_row_json(r) for r in rows], indent=2, sort_keys=True))
        return
    for r in rows:
        b = r.best
        if b is not None and not b.on_hardware:  # never "best": a rehearsal / emulated row is not an NPU2 figure
            what = (f"  no NPU2 row; {not_npu2_mark(b)}: {b.method} tile {tile_text(b.tile)} "
                    f"mean_rel_L1 {sci(b.mean_rel_L1)}")
        else:
            what = (f"  best {b.method} ({b.evidence}) tile {tile_text(b.tile)} {num(b.throughput)} {r.spec.unit} "
                    f"mean_rel_L1 {sci(b.mean_rel_L1)}" if b else "")
        click.echo(f"{r.spec.kernel} {shape_args(r.shape)}: {STATUS_GLYPH[r.status]} {r.status}" + what
                   + (f"  used by {' + '.join(r.used_by)}" if r.used_by else ""))


for _command in group_commands("registry"):  # registry import / build: rows of handlers.verbs
    registry.add_command(_command)


commands = [registry]
