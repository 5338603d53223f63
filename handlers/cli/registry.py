"""`ledger registry ...`: look up measured configs, import mlir-air registry files, build/check projections.

The ledger comes from `ctx.obj["open_ledger"]()` (the main CLI's App provides it); the default output
directory is `ctx.obj["workspace"]` (else the current directory). Commands stay thin: parse, call
`registry.lookup` / `handlers.registry_ops`, print, map errors to exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from handlers.registry_merge import merge_into_mlir_air
from handlers.registry_ops import SkippedRows, build_projections, import_registry_accounted, link_message
from handlers.results import registry_row_json
from handlers.results_workbench import registry_build_json, registry_import_json, registry_merge_json
from npu_kernels.numerics.kernels import piece
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
    if piece(canonical_kernel(kernel), "best_config"):  # GEMM's: from the JSON
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


@registry.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--allow-skip", is_flag=True, help="import what can be imported even when some rows cannot")
@click.option("--sweep-dtype", type=click.Choice(["bf16", "f32"]), default="bf16", show_default=True,
              help="the registry a sweep_gemm.py results / --emit file there is for (the script's --dtype; its rows "
                   "do not say)")
@click.option("--json", "as_json", is_flag=True, help="print the per-table accounts as JSON")
@click.pass_context
def import_cmd(ctx, directory, allow_skip, sweep_dtype, as_json) -> None:
    """Import an mlir-air kernel_registry/ folder as it is (details/*.json and every tested-shapes table, each
    row's status kept), or a details/ folder of JSON files, sweep_gemm.py's new-M rows among them (idempotent). Prints one line per table: rows read,
    imported, duplicate (a shape another table gave), skipped and why; exits 1 when a row was skipped and
    --allow-skip is not given (then nothing is imported)."""
    try:
        result = import_registry_accounted(_ledger(ctx), directory, allow_skip=allow_skip, sweep_dtype=sweep_dtype)
    except SkippedRows as e:
        _print_accounts(e.result.accounts, as_json, err=True)
        raise click.ClickException(str(e)) from None
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from e
    _print_accounts(result.accounts, as_json)
    if not as_json:
        click.echo(f"imported {result.added} new events into registry:import"
                   + (f"; {result.skipped} row(s) skipped (--allow-skip)" if result.skipped else ""))


def _print_accounts(accounts, as_json: bool, err: bool = False) -> None:
    if as_json:
        click.echo(json.dumps(registry_import_json(accounts), indent=2), err=err)
        return
    rows = [("kernel", "file", "read", "imported", "duplicate", "skipped", "why")]
    rows += [(a.kernel, a.file, str(a.read), str(a.imported), str(a.duplicate), str(len(a.skipped)),
              a.why + (f" [header: {a.header}]" if a.skipped and "no schema" in a.why else ""))
             for a in accounts]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[6], err=err)


@registry.command("build")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="output root (default: the workspace)")
@click.option("--check", is_flag=True, help="write nothing; exit 1 if any file on disk differs from the projection")
@click.option("--into-mlir-air", "into", type=click.Path(exists=True, file_okay=False),
              help="add the ledger's new hardware rows to this mlir-air checkout's kernel_registry/ (its tables' own "
                   "columns, its GEMM JSON), leaving its prose and rows as they are")
@click.option("--json", "as_json", is_flag=True, help="print what was written / found as JSON")
@click.pass_context
def build_cmd(ctx, out_dir, check, into, as_json) -> None:
    """Rebuild the registry and every model's docs from the ledger (or --check them)."""
    if into:
        try:
            added = merge_into_mlir_air(_ledger(ctx, read_only=True).read_all(), into)
        except FileNotFoundError as e:
            raise click.ClickException(str(e)) from None
        if as_json:
            click.echo(json.dumps(registry_merge_json(added)))
            return
        for rel, n in sorted(added.items()):
            click.echo(f"{rel}: {n} row(s) added")
        click.echo(f"added {sum(added.values())} row(s) to {into}" if added else f"nothing new for {into}")
        return
    out = Path(out_dir) if out_dir else _workspace(ctx)
    result = build_projections(_ledger(ctx, read_only=True).read_all(), out, check=check)
    if as_json:
        click.echo(json.dumps(registry_build_json(result, check)))
    else:
        _print_build(out, result, check)
    if not result.clean if check else result.links:
        ctx.exit(1)


def _print_build(out: Path, result, check: bool) -> None:
    for rel in result.links:
        click.echo(f"{'link' if check else 'refused'}: {link_message(out, rel)}", err=True)
    if not check:
        click.echo(f"wrote {len(result.written)} of {result.total} files under {out}")
        return
    for rel in result.differing:
        click.echo(f"{'missing' if rel in result.missing else 'differs'}: {rel}", err=True)
    for rel in result.stray:
        click.echo(f"stray: {rel} (no projection writes it)", err=True)
    for clash in result.clashes:
        click.echo(f"clash: {clash}", err=True)
    if not result.clean:
        click.echo(f"{len(result.differing)} of {result.total} projected files differ from the ledger, "
                   f"{len(result.stray)} stray file(s), {len(result.clashes)} folder clash(es), "
                   f"{len(result.links)} symbolic link(s) in the way; rebuild with `ledger registry build` and "
                   "remove the stray files and links", err=True)
    else:
        click.echo(f"all {result.total} projected files match the ledger")


commands = [registry]
