"""Keep what a scaffolded model directory states about the switches in step with the ledger (issue #40 item 2).

`sync_scaffolds(events, mlir_air_dir)`: for every deployment with a model directory `ledger scaffold` wrote under
`$MLIR_AIR_DIR/programming_examples/llms/<name>/`, its ARCHITECTURE.md is re-rendered under the switches the
ledger records now (requested at init plus the optimisations Phases 4-5 applied:
handlers.gates.runtime.declared_options) whenever they differ from the ones it states
(npu_kernels.mlir_air.architecture_page.refresh_architecture; a file the engineer changed is left alone). The App
runs it after every command that records (handlers.bootstrap.App.refresh_projections), as it rebuilds the
projections: a page that said "every switch off" after Phases 4-5 turned them on is rewritten by the same command.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from handlers.gates.runtime import declared_options
from npu_kernels.mlir_air.architecture_page import refresh_architecture
from npu_kernels.model.config import ModelConfig
from ledger.record import RecordedEvent
from registry.model_docs import model_dir_name
from statemachine.fold import fold
from npu_kernels.settings import env_get
from ledger.streams import DEPLOYMENT_PREFIX

ENV_MLIR_AIR = "MLIR_AIR_DIR"  # npu_kernels.mlir_air.table.ENV_MLIR_AIR


def sync_scaffolds(events: Iterable[RecordedEvent], mlir_air_dir: str | None = None) -> list[str]:
    """The ARCHITECTURE.md files rewritten (see the module docstring); none without an mlir-air checkout."""
    root = mlir_air_dir or env_get(ENV_MLIR_AIR)
    if not root:
        return []
    streams: dict[str, list[RecordedEvent]] = defaultdict(list)
    for e in events:
        if e.stream_id.startswith(DEPLOYMENT_PREFIX):
            streams[e.stream_id].append(e)
    written = []
    for stream in streams.values():
        try:
            state = fold(stream)
        except ValueError:  # an impossible stream is the audit's to report, not this page's
            continue
        if not state.config:
            continue
        config = ModelConfig(**{k: v for k, v in state.config.items() if k in ModelConfig.__dataclass_fields__})
        path = refresh_architecture(root, model_dir_name(state.name), config, declared_options(state)[0])
        if path:
            written.append(path)
    return written
