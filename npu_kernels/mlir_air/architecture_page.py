"""A scaffolded model directory's ARCHITECTURE.md: the per-layer ELF sequence of each path under the deployment's
switches, with a `## Switches` table stating them (`architecture_page`, `stated_switches` reads it back), and its
refresh when the ledger's switches change (`refresh_architecture`), so the page always states the switches the
ledger records (issue #40 item 2). `ledger scaffold` (npu_kernels.mlir_air.scaffold) writes it first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from npu_kernels.perf.dispatch import SWITCHES, dispatch_plan
from npu_kernels.perf.figures import path_switches

MANIFEST = ".npu-ledger-scaffold.json"  # the sha256 of every file `ledger scaffold` wrote (kept: what was changed)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


SWITCH_TABLE = "## Switches"


def architecture_page(name: str, config, switches: dict[str, bool] | None) -> str:
    """The per-layer ELF sequence of each path under the deployment's own switches (Phase 4's on prefill, Phase 5's
    `decode:` ones on decode, npu_kernels.perf.figures.path_switches), and a table of those switches."""
    pre, dec = path_switches(switches or {}, "prefill"), path_switches(switches or {}, "decode")
    p, d = dispatch_plan(config, pre), dispatch_plan(config, dec)
    on = lambda v: "on" if v else "off"  # noqa: E731
    lines = [f"# {name}: architecture", "", f"{p.n_layers} decoder layers; per layer, in dispatch order "
             "(`npu_kernels.perf.dispatch.dispatch_plan`), under the deployment's switches as the ledger records them "
             "(requested at init, and the optimisations Phases 4-5 applied).", "", SWITCH_TABLE, "",
             "| switch | prefill | decode |", "|---|---|---|"]
    lines += [f"| {k} | {on(pre[k])} | {on(dec[k])} |" for k in SWITCHES]
    lines += ["", "## Prefill (per layer)", "", *_layer_lines(config, p.prefill_layer, p.prefill_host_layer,
                                                          p.conv_prefill_layer, p.conv_prefill_host_layer)]
    lines += ["", f"After the layers: `{p.lm_head.elf}.elf` (" + ", ".join(x.role for x in p.lm_head.launches) + ")",
              "", "## Decode (per layer, per token)", ""]
    lines += _layer_lines(config, d.decode_layer, d.decode_host_layer, d.conv_decode_layer, d.conv_decode_host_layer)
    return "\n".join(lines) + "\n"


def _layer_lines(config, calls, host, conv_calls, conv_host) -> list[str]:
    """One path's per-layer calls; a hybrid's (LFM2) attention and short-convolution layers each under the layer
    indices that run them (the schedule of `layer_types`, never a modulo)."""
    def block(cs, hs):
        return ([f"- `{c.elf}.elf`: " + ", ".join(f"{x.role} ({x.kernel})" for x in c.launches) for c in cs]
                + [f"- host: {h.name}" for h in hs])
    conv = config.arch.conv_layers()
    if not conv:
        return block(calls, host)
    attn = [i for i in range(config.n_layers) if i not in conv]
    return ([f"Attention layers {attn}:", "", *block(calls, host), "", f"Short-convolution layers {list(conv)}:", "",
             *block(conv_calls, conv_host)])


def stated_switches(architecture_md: str) -> dict[str, dict[str, bool]]:
    """{"prefill": {switch: on}, "decode": {...}} as an ARCHITECTURE.md written here states them."""
    text = architecture_md.split(SWITCH_TABLE, 1)[1].split("\n## ", 1)[0]
    out: dict[str, dict[str, bool]] = {"prefill": {}, "decode": {}}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in SWITCHES:
            out["prefill"][cells[0]], out["decode"][cells[0]] = cells[1] == "on", cells[2] == "on"
    return out


def refresh_architecture(mlir_air_dir: str | Path, name: str, config, switches: dict[str, bool]) -> str | None:
    """Rewrite a scaffolded model directory's ARCHITECTURE.md when the switches the ledger records now differ from
    the ones it states, so it never says a switch is off that Phases 4-5 turned on (handlers.scaffold_sync calls it
    after every command that records). Only a file the scaffold wrote and nobody changed (its manifest hash) is
    rewritten; returns its path, or None (no such directory, the engineer's file, or nothing to change)."""
    d = Path(mlir_air_dir).expanduser().resolve() / "programming_examples" / "llms" / name
    path, mpath = d / "ARCHITECTURE.md", d / MANIFEST
    if not (path.is_file() and mpath.is_file()):
        return None
    manifest = json.loads(mpath.read_text())
    text = path.read_text()
    if manifest.get("ARCHITECTURE.md") != _sha(text):
        return None
    new = architecture_page(name, config, switches)
    if new == text:
        return None
    path.write_text(new)
    manifest["ARCHITECTURE.md"] = _sha(new)
    mpath.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return str(path)
