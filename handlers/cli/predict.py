"""`ledger predict CONFIG|NAME`: the modelled NPU2 TTFT, decode rate and per-ELF breakdown of a model.

CONFIG is a config.json or a local HF folder (resolved by kernels.model.architecture); an out-of-scope model
(MoE, sliding window, MLA, encoder-decoder, non-SwiGLU) ends as one `error:` line and exit status 1.
NAME (a deployment) is predicted from its folded ConfigResolved; the Phase 6 page of a deployment carries the
per-ELF chart of its own switches (`registry.model_pages.render_phase6`).

`--curve` gives prefill length and decode context as axes instead of one point (kernels.perf.curve): TTFT and
prefill tokens/s against padded prefill length (each point the deployment compiled for that length), decode
tokens/s against context, as markdown tables (or `--json`) and a PNG beside them (`--png PATH`, default
`<target name>_curve.png` in the current directory). Its build-length point and its Phase 6 context point are
exactly the figures `ledger predict` gives without `--curve`.

Without `--curve` the lengths default to the deployment's build (2048 and 128, cut to the model's context window)
and a length past the window is refused; the figures on the user's machine follow the modelled table, from the
ledger's `ledger perf calibrate` fit with its error bars, or a line saying mlir-air's published machine is used
(handlers.predicting).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from handlers import results
from handlers.predicting import calibration_lines, predict_result
from handlers.queries import TargetError, context_window, predict_config
from kernels.perf.curve import curve_png, npu2_curve, render_curve
from kernels.perf.dispatch import normalize_switches
from kernels.perf.predict import render_table
from kernels.perf.q4nx import WEIGHTS


@click.command("predict")
@click.argument("target", metavar="CONFIG|NAME")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: ttft_s, decode_tokens_per_s, calls, breakdown")
@click.option("--seq", type=click.IntRange(1, 131072), default=None,
              help="prefill length (default: the deployment's build, 2048 cut to the model's context window)")
@click.option("--ctx", type=click.IntRange(1, 131072), default=None,
              help="decode context length (default 128, cut to the model's context window)")
@click.option("--switches", default=None,
              help="comma-separated switches that are ON (fusion, weight_residency, intermediate_bos, seq_first; "
                   "'none' for all off); default: all on")
@click.option("--host-memory-gib", type=click.FloatRange(min=0.1), default=None,
              help="the target machine's memory, to check that the resident BOs fit it (NPU2 shares host DDR)")
@click.option("--curve", is_flag=True,
              help="TTFT / prefill tokens/s against padded prefill length and decode tokens/s against context "
                   "(the lengths and contexts are the curve's own: --seq / --ctx do not apply), with a PNG")
@click.option("--png", "png_path", type=click.Path(dir_okay=False), default=None,
              help="with --curve: where the PNG goes (default <name>_curve.png here)")
@click.option("--weights", type=click.Choice(WEIGHTS), default="bf16", show_default=True,
              help="how the projections are stored: bf16; q4nx-host (4-bit, dequantised at load: the bf16 pipeline); "
                   "q4nx-device (4-bit on the NPU: fused one-dispatch decode of 4-bit GEMVs, kernels.perf.q4nx)")
@click.option("--calibration", default=None,
              help="the `ledger perf calibrate` fit to report with (default: the ledger's latest; 'published': "
                   "mlir-air's published machine)")
@click.pass_obj
def predict_cmd(app, target: str, as_json: bool, seq: int | None, ctx: int | None, switches: str | None,
                host_memory_gib: float | None, curve: bool, png_path: str | None, weights: str,
                calibration: str | None) -> None:
    """Modelled NPU2 performance of CONFIG (config.json / HF folder) or deployment NAME, and on the machine the
    ledger's calibration fitted (`ledger perf calibrate`), with its error bars."""
    host_bytes = int(host_memory_gib * 2**30) if host_memory_gib else None
    if curve:
        try:
            config = predict_config(app, target)
        except TargetError as e:
            raise click.ClickException(str(e)) from e
        _curve(app, target, config, switches, host_bytes, as_json, png_path, weights)
        return
    try:
        p, out = predict_result(app, target, seq=seq, ctx=ctx, switches=switches, weights=weights,
                                host_bytes=host_bytes, calibration=calibration)
    except TargetError as e:
        raise click.ClickException(str(e)) from e
    except KeyError as e:
        raise click.ClickException(e.args[0]) from e
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        title = Path(target).name + ("" if weights == "bf16" else f" ({weights})")
        sys.stdout.write(render_table(p, title=title))
        for line in calibration_lines(out["calibration"]):
            click.echo(line)
    for problem in p.memory["problems"]:
        click.echo(f"warning: {problem}", err=True)


def _curve(app, target: str, config, switches: str | None, host_bytes: int | None, as_json: bool,
           png_path: str | None, weights: str = "bf16") -> None:
    """`ledger predict --curve`: both curves under one switch set, the table (or JSON) on stdout, the PNG beside."""
    try:
        sw = normalize_switches(switches)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    name = Path(target).stem if Path(target).is_file() else Path(target).name
    c = npu2_curve(config, sw, sw, max_positions=context_window(app, target), host_bytes=host_bytes, weights=weights)
    png = Path(png_path or f"{name}_curve.png")
    try:
        png.write_bytes(curve_png(c, f"{name}: {c['label']}"))
    except OSError as e:
        raise click.ClickException(f"cannot write the curve's PNG {png}: {e.strerror or e}") from e
    if as_json:
        click.echo(json.dumps(results.curve_json(c, str(png)), sort_keys=True))
    else:
        sys.stdout.write(render_curve(c, name))
        click.echo(f"chart: {png}")


commands = [predict_cmd]
