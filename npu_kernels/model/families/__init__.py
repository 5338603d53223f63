"""The family adapters: one module per decoder family, each turning a config.json into the architecture
description (`npu_kernels.model.description`). The only code that knows a family or architecture by name
(tests/unit/test_families.py checks it); `family_of` picks the adapter, `refused_reason` names a family's
missing piece in one line. Every module of this package but `common` and `refused` is an adapter module, found
here by its `ADAPTERS` (its `Family` records): a new family is its module alone, naming the model features
(npu_kernels.model.features) it combines.

Imported by npu_kernels.model.architecture (assess / resolve) only; everything else reads the description."""

from __future__ import annotations

import importlib
import pkgutil

from npu_kernels.model.families import common, gemma, refused
from npu_kernels.model.families.common import Family


def _adapters() -> tuple[Family, ...]:
    """The `ADAPTERS` of every adapter module of this package, by module name."""
    found: list[Family] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name not in ("common", "refused"):
            found += importlib.import_module(f"{__name__}.{info.name}").ADAPTERS
    return tuple(found)


FAMILIES: tuple[Family, ...] = _adapters()
MODEL_TYPES = {t: f.architectures[0] for f in FAMILIES for t in f.model_types} | refused.MODEL_TYPES


def family_of(arch: str) -> Family | None:
    """The adapter of architecture `arch` (a config.json's `architectures[0]`), or None."""
    return next((f for f in FAMILIES if arch in f.architectures), None)


def in_scope_names() -> list[str]:
    return sorted(a for f in FAMILIES for a in f.architectures)


refused_reason = refused.reason
rope_theta = common.rope_theta
rope_scaling = common.rope_scaling
text_config = gemma.text_config
