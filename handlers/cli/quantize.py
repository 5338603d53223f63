"""`ledger quantize HF_FOLDER --to q4nx OUT [--layout llama|qwen3]`: a bf16 model as a Q4NX bundle
(npu_kernels.model.q4nx_bundle.write_bundle), so a 4-bit deployment needs no download. OUT is a file
(`model.q4nx` is written inside OUT when it is a folder). Matrices whose sides are not whole 32x256 blocks are
padded with zero rows/columns (zero codes, scales and mins); the command says which. Every projection of every
layer is quantised (npu_kernels.model.q4nx_bundle.projection_names: q/k/v/o, gate/up/down, LFM2's conv in/out), the
count printed as N of N; a family whose projections the bundle cannot name is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import click
import structlog

from handlers.results_workbench import quantize_json
from handlers.workbench import quantize_folder
from npu_kernels.model.q4nx import LAYOUTS

log = structlog.get_logger(__name__)


@click.command("quantize")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option("--to", "fmt", type=click.Choice(["q4nx"]), required=True, help="the 4-bit format")
@click.argument("out", type=click.Path())
@click.option("--layout", type=click.Choice(list(LAYOUTS)), default="llama", show_default=True,
              help="llama: I16 blocks, w = scale*(q - min); qwen3: I8 packed chunks, w = scale*q + min")
@click.option("--json", "as_json", is_flag=True)
def quantize_cmd(folder: str, fmt: str, out: str, layout: str, as_json: bool) -> None:
    """Quantise the bf16 HF FOLDER into a Q4NX bundle at OUT."""
    written = quantize_folder(folder, out, layout, fmt)
    target = Path(written["path"])
    log.info("quantized", folder=folder, out=str(target), layout=layout, sha256=written["sha256"])
    if as_json:
        click.echo(json.dumps(quantize_json(written), sort_keys=True))
        return
    pads = ", ".join(written["padded"]) or "none"
    click.echo(f"wrote {target.name} ({layout} layout, {written['n_projections']} of {written['n_projections_total']} "
               f"projections 4-bit, {written['n_bf16']} tensors bf16 (norms, biases, conv taps, embedding, LM head), "
               f"{written['bytes'] / 2**20:.1f} MiB, sha256 {written['sha256'][:12]}); zero-padded to whole 32x256 "
               f"blocks: {pads}")


commands = [quantize_cmd]
