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
from kernels.perf.predict import predict, render_table


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
@click.pass_obj
def predict_cmd(app, target: str, as_json: bool, seq: int, ctx: int, switches: str | None,
                host_memory_gib: float | None) -> None:
    """Modelled NPU2 performance of CONFIG (config.json / HF folder) or deployment NAME."""
    try:
        config = predict_config(app, target)
    except TargetError as e:
        raise click.ClickException(str(e)) from e
    try:
        p = predict(config, seq=seq, switches=switches, ctx=ctx,
                    host_bytes=int(host_memory_gib * 2**30) if host_memory_gib else None)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(json.dumps(results.predict_json(p), sort_keys=True))
    else:
        sys.stdout.write(render_table(p, title=Path(target).name))
    for problem in p.memory["problems"]:
        click.echo(f"warning: {problem}", err=True)


commands = [predict_cmd]
