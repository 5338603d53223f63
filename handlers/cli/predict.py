"""`ledger predict CONFIG|NAME`: the modelled NPU2 TTFT, decode rate and per-ELF breakdown of a model.

CONFIG is a config.json or a local HF folder (resolved by kernels.model.architecture); an out-of-scope model
(MoE, sliding window, MLA, encoder-decoder, non-SwiGLU) ends as one `error:` line and exit status 1.
NAME (a deployment) is predicted from its folded ConfigResolved; the Phase 6 page of a deployment carries the
per-ELF chart of its own switches (`registry.model_pages.render_phase6`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from handlers import results
from handlers.queries import TargetError, predict_config
from kernels.perf.predict import render_table
from kernels.perf.q4nx import WEIGHTS, matching_anchor, predict_weights


@click.command("predict")
@click.argument("target", metavar="CONFIG|NAME")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: ttft_s, decode_tokens_per_s, calls, breakdown")
@click.option("--seq", type=click.IntRange(1, 131072), default=2048, show_default=True, help="prefill length")
@click.option("--ctx", type=click.IntRange(1, 131072), default=128, show_default=True, help="decode context length")
@click.option("--switches", default=None,
              help="comma-separated switches that are ON (fusion, weight_residency, intermediate_bos, seq_first; "
                   "'none' for all off); default: all on")
@click.option("--host-memory-gib", type=click.FloatRange(min=0.1), default=None,
              help="the target machine's memory, to check that the resident BOs fit it (NPU2 shares host DDR)")
@click.option("--weights", type=click.Choice(WEIGHTS), default="bf16", show_default=True,
              help="how the projections are stored: bf16; q4nx-host (4-bit, dequantised at load: the bf16 pipeline); "
                   "q4nx-device (4-bit on the NPU: fused one-dispatch decode of 4-bit GEMVs, kernels.perf.q4nx)")
@click.pass_obj
def predict_cmd(app, target: str, as_json: bool, seq: int, ctx: int, switches: str | None,
                host_memory_gib: float | None, weights: str) -> None:
    """Modelled NPU2 performance of CONFIG (config.json / HF folder) or deployment NAME."""
    try:
        config = predict_config(app, target)
    except TargetError as e:
        raise click.ClickException(str(e)) from e
    try:
        p = predict_weights(config, weights, seq=seq, switches=switches, ctx=ctx,
                            host_bytes=int(host_memory_gib * 2**30) if host_memory_gib else None)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        out = results.predict_json(p)
        out["weights"] = weights
        anchor = matching_anchor(config) if weights == "q4nx-device" else None
        if anchor is not None:  # the 4-bit README's own figures, beside the modelled ones
            out["measured"] = {"source": "measured NPU2", "role": anchor["role"], "ttft_s": anchor["ttft_s"],
                               "decode_tokens_per_s": anchor["decode_tok_s"], "src": anchor["src"],
                               "conditions": anchor["conditions"]}
        click.echo(json.dumps(out, sort_keys=True))
    else:
        title = Path(target).name + ("" if weights == "bf16" else f" ({weights})")
        sys.stdout.write(render_table(p, title=title))
    for problem in p.memory["problems"]:
        click.echo(f"warning: {problem}", err=True)


commands = [predict_cmd]
