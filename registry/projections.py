"""Every projection the ledger has, as {relative path: bytes} — pure functions of the events.

Layout (it mirrors mlir-air's `programming_examples/`, so the output can be dropped into a checkout):

    kernel_registry/supported_kernels.md
    kernel_registry/details/<Kernel>.md
    kernel_registry/details/GEMM_bf16_in_bf16_out.json, GEMM_bf16_in_fp32_out.json
    llms/<model>/TODO.md
    llms/<model>/docs/development_progress/{progress,phase_timing,phase1_kernels,phase2_block,phase3_full,
        phase4_prefill,phase5_decode,phase6_finalize,LESSONS}.md (+ phase3_layer_cosine.png)
    llms/<model>/docs/evaluation_report.md

Paths use `/` on every platform. Building twice from the same events gives the same bytes.
"""

from __future__ import annotations

from typing import Collection, Iterable, Sequence

from ledger.record import RecordedEvent
from ledger.streams import DEPLOYMENT_PREFIX, deployment_stream
from registry.fold import fold_registry
from registry.model_docs import model_dir_name, project_model_docs
from registry.model_fold import DeploymentView
from registry.render_json import render_all_json
from registry.render_markdown import render_all_markdown

REGISTRY_DIR = "kernel_registry"


def project_registry(events: Sequence[RecordedEvent]) -> dict[str, bytes]:
    """The kernel registry (markdown index + details pages + GEMM JSON), keyed by path."""
    data = fold_registry(events)
    files = render_all_markdown(data)
    files.update(render_all_json(data))
    return {f"{REGISTRY_DIR}/{rel}": files[rel] for rel in sorted(files)}


def deployments(events: Sequence[RecordedEvent]) -> list[str]:
    """Every deployment name found in the events (from `deployment:<name>` stream ids), sorted."""
    return sorted({e.stream_id[len(DEPLOYMENT_PREFIX):] for e in events if e.stream_id.startswith(DEPLOYMENT_PREFIX)})


def project_all(events: Sequence[RecordedEvent], only: Collection[str] | None = None,
                folded: Iterable[DeploymentView] = ()) -> dict[str, bytes]:
    """Registry + every deployment's docs, keyed by path, sorted. With `only`: the registry and the docs of those
    deployments alone (and of any other whose llms/ folder is the same, so the same one wins as in the whole
    build): what a command that appended to those deployments' streams alone changes, since a deployment's docs
    read its own stream and the imported nightly rows, never another deployment's stream. `folded`: views of
    deployments the command folded already (its units of work), rendered from instead of folding their streams
    again while current (`project_model_docs`); the bytes are the same either way."""
    out = project_registry(events)
    names = deployments(events)
    if only is not None:
        folders = {model_dir_name(n) for n in only}
        names = [n for n in names if model_dir_name(n) in folders]
    views = {v.stream_id: v for v in folded}
    for name in names:
        out.update(project_model_docs(events, name, views.get(deployment_stream(name))))
    return {k: out[k] for k in sorted(out)}


__all__ = ["project_registry", "project_all", "project_model_docs", "deployments"]
