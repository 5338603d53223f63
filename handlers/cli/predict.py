"""`ledger predict CONFIG|NAME`: the modelled NPU2 TTFT, decode rate and per-ELF breakdown of a model.

CONFIG is a config.json or a local HF folder (resolved by npu_kernels.model.architecture); an out-of-scope model
(MoE, sliding window, MLA, encoder-decoder, non-SwiGLU) ends as one `error:` line and exit status 1.
NAME (a deployment) is predicted from its folded ConfigResolved; the Phase 6 page of a deployment carries the
per-ELF chart of its own switches (`registry.model_pages.render_phase6`).

`--curve` gives prefill length and decode context as axes instead of one point (npu_kernels.perf.curve): TTFT and
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

from handlers.predicting import calibration_lines, predict_result
from handlers.queries import TargetError, curve_name, curve_result
from npu_kernels.perf.curve import render_curve
from npu_kernels.perf.predict import render_table
from npu_kernels.perf.q4nx import WEIGHTS
from registry.text import escaped


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
                   "q4nx-device (4-bit on the NPU: fused one-dispatch decode of 4-bit GEMVs, npu_kernels.perf.q4nx)")
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
    try:
        if curve:
            value, c = curve_result(app, target, switches=switches, weights=weights, host_bytes=host_bytes,
                                    png=png_path)
        else:
            p, value = predict_result(app, target, seq=seq, ctx=ctx, switches=switches, weights=weights,
                                      host_bytes=host_bytes, calibration=calibration)
    except (TargetError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e
    except KeyError as e:
        raise click.ClickException(e.args[0]) from e
    if as_json:
        click.echo(json.dumps(value, sort_keys=True))
    elif curve:
        sys.stdout.write(render_curve(c, curve_name(target)))
        click.echo(f"chart: {value['png']}")
    else:
        title = Path(target).name + ("" if weights == "bf16" else f" ({weights})")
        sys.stdout.write(render_table(p, title=title))
        for line in calibration_lines(value["calibration"]):
            click.echo(escaped(line))  # a calibration's name and figures come from the ledger
    for problem in ([] if curve else p.memory["problems"]):
        click.echo(f"warning: {problem}", err=True)


commands = [predict_cmd]
