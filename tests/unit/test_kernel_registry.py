"""The kernel registry's coverage (issue #47 item 1): every kernel module of npu_kernels.numerics.kernels declares
every piece of a KernelDef, and every room of the product takes that kernel from the registry - the catalog, the
tolerances, the three in-process executors, the tile planner, mlir-air's harness inputs and table, the twin, the
cost model and the registry importer. A failure names the kernel and the missing piece. No product module outside the
kernel's own spells its name, but for the rooms that use a kernel in a model (plans, dispatch, the pipeline)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from types import ModuleType

import pytest

from npu_kernels.numerics import kernels as registry
from npu_kernels.numerics.kernels.base import (REQUIRED, Absent, absences, catalog_pages, from_module, harness_entries,
                                              missing_pieces, twin_kinds)

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = registry.definitions()
IDS = [d.name for d in DEFINITIONS]
# the rooms that call a kernel by name to run a model (a plan row, a dispatch launch - the 4-bit deployment's too, its
# prefill attention's prediction included -, a pipeline stage, the synthetic deployment's kernel rows), not declare it
USERS = ("npu_kernels/model/", "npu_kernels/perf/dispatch", "npu_kernels/perf/q4nx", "registry/synthetic")


def test_the_registry_holds_its_modules_in_order():
    assert [d.name for d in DEFINITIONS] == list(registry.MODULES)
    assert all(registry.get(d.name) is d for d in DEFINITIONS) and registry.get("no-such-kernel") is None


@pytest.mark.parametrize("d", DEFINITIONS, ids=IDS)
def test_every_registered_kernel_declares_every_piece(d):
    assert not missing_pieces(d), f"kernel {d.name} lacks: {', '.join(missing_pieces(d))}"


def test_the_completeness_check_names_the_kernel_and_the_piece():
    from dataclasses import replace

    d = DEFINITIONS[0]
    broken = replace(d, torch=None, constants={}, harness={"since": "x"})
    assert missing_pieces(broken) == ["torch", "constants", "harness (no command)", "evidence (one per constant)"]
    # an optional function piece a module constant of the same name filled (a regex is no `herd_of`)
    assert missing_pieces(replace(d, herd_of=object())) == ["herd_of (not a function)"]
    # a measured-row override of a rule the kernel does not have
    assert missing_pieces(replace(d, measured_overrides=(f"{d.name}.no_such_rule",))) == [
        "measured_overrides (not one of its tile rules)"]
    # a FLOP count for the GFLOP/s figure of a kernel whose figure is GB/s
    d = next(x for x in DEFINITIONS if x.throughput == "gbps")
    assert missing_pieces(replace(d, dense_flops=d.spec.flops)) == [
        "dense_flops (a GFLOP/s count: throughput is not gflops)"]
    half = ModuleType("half_written")  # a new kernel's module with its name and reference only
    half.NAME, half.fp32 = "half_written", d.fp32
    assert missing_pieces(from_module(half)) == [p for p in REQUIRED if p not in ("name", "fp32")]
    assert set(REQUIRED) >= {"spec", "tolerances", "fp32", "emulated", "torch", "tile_rules", "tile_default",
                             "harness_case", "harness", "twin", "cost_features", "constants", "registry_page"}


def test_a_piece_is_declared_absent_with_its_reason_or_it_is_missing():
    """A kernel may lack a piece (mlir-air has no harness for it): its module says so, `Absent("why")`. A module that
    leaves the piece out, sets it to None, or declares it absent without a reason still lacks it."""
    from dataclasses import replace

    d = DEFINITIONS[0]
    assert missing_pieces(replace(d, harness=Absent("mlir-air has no harness for it"), twin=Absent("no script"))) == []
    assert missing_pieces(replace(d, harness=Absent(""), twin=None)) == ["harness", "twin"]
    forgot = ModuleType("forgot_its_harness")
    for piece in REQUIRED:
        value = getattr(d, piece)
        setattr(forgot, piece.upper() if not callable(value) else piece, value)
    assert missing_pieces(from_module(forgot)) == []
    del forgot.HARNESS
    assert missing_pieces(from_module(forgot)) == ["harness"]
    forgot.HARNESS = None  # `HARNESS = None  # a comment` is no reason the registry can read
    assert missing_pieces(from_module(forgot)) == ["harness"]


def test_an_optional_piece_is_asked_of_the_registry():
    """`piece(kernel, name)`: a registered kernel's own (gemm's executor call at the planned tile, its GFLOP/s fit, its
    methods), else KernelDef's default."""
    for d in DEFINITIONS:
        for name in ("calls_with_tile", "fit_metric", "method_tier", "best_config", "throughput"):
            assert registry.piece(d.name, name) is getattr(d, name), f"kernel {d.name}: {name}"
    assert registry.piece("no-such-kernel", "fit_metric") == "latency"
    assert registry.piece("no-such-kernel", "method_tier") is None and not registry.piece("no-such-kernel", "calls_with_tile")
    assert registry.piece("gemm", "calls_with_tile") is True and registry.piece("gemm", "fit_metric") == "GFLOP/s"
    assert {c: registry.kernel_tolerance("gemm", c) for c in ("f32-out", "bf16-out-high", "bf16-out-low")} == {
        "f32-out": (1.6e-2, 1.5e-3), "bf16-out-high": (1.6e-2, 1.5e-3), "bf16-out-low": (1.6e-2, 4e-3)}  # its module's
    assert registry.piece("gemm", "best_config") is True and registry.piece("no-such-kernel", "best_config") is False
    stand_ins = registry.stand_ins()  # gemm's two mlir-air directories, each its own harness kind
    assert {k: (kernel, t.directory) for k, (kernel, t) in stand_ins.items() if k.startswith("gemm")} == {
        "gemm": ("gemm", "matrix_multiplication/bf16_in_bf16_out"),
        "gemm_f32": ("gemm", "matrix_multiplication/bf16_in_fp32_out")}
    # its three harness-table entries (a command per contract), the table's from its module
    from npu_kernels.mlir_air.table import load_harness_table

    table = load_harness_table().harnesses
    assert {k for k in registry.harnesses() if k.split("@")[0] == "gemm"} == {"gemm", "gemm@bf16-out-low", "gemm@f32-out"}
    assert all(table[k].command == e["command"] for k, e in registry.harnesses().items())
    method_tier = registry.piece("gemm", "method_tier")
    assert method_tier({"M": 64, "K": 256, "N": 64}, "bf16-out-low", {}) == ("direct", "low")
    assert method_tier({"M": 2048, "K": 2048, "N": 2048}, "bf16-out-high", {"method": "auto"}) == ("fused-cast", "high")
    assert method_tier({"M": 64, "K": 256, "N": 64}, "f32-out", {"CODEGEN": "direct"}) == ("direct", "high")


@pytest.mark.parametrize("d", DEFINITIONS, ids=IDS)
def test_every_declared_absence_names_its_reason(d):
    assert all(len(why.strip()) >= 20 for why in absences(d).values()), f"kernel {d.name}: {absences(d)}"


def _where(d, piece: str, ok: bool) -> None:
    assert ok, f"kernel {d.name}: {piece} does not take it from the registry"


@pytest.mark.parametrize("d", DEFINITIONS, ids=IDS)
def test_every_room_takes_a_registered_kernel_from_the_registry(d):
    from npu_kernels.mlir_air.table import load_harness_table
    from npu_kernels.mlir_air.twin import HARNESS_DIRS
    from npu_kernels.mlir_air.twin.harness import KINDS, STAND_INS
    from npu_kernels.numerics.catalog import CATALOG
    from npu_kernels.numerics.executors.base import KERNEL_NAMES, Fp32Executor
    from npu_kernels.numerics.executors.emulated import EmulatedExecutor
    from npu_kernels.numerics.executors.torch_exec import TorchExecutor
    from npu_kernels.numerics.harness_inputs import HARNESS_KERNELS
    from npu_kernels.numerics.tile_defaults import DEFAULTS
    from npu_kernels.numerics.tile_rules import kernel_rules
    from npu_kernels.perf.constants import EVIDENCE, FITTED
    from npu_kernels.perf.kernel_model import KERNELS as MODELLED
    from registry.catalog import canonical_kernel, spec_by_key
    from registry.mlir_air_tables import DETAILS, INDEX, LATER, NO_JSON, PAGE_OF

    _where(d, "spec (catalog)", CATALOG.get(d.name) is d.spec)
    _where(d, "tolerances", all(registry.tolerances()[(d.name, c)] == t for c, t in d.tolerances.items()))
    _where(d, "the executors' kernel names", d.name in KERNEL_NAMES)
    _where(d, "fp32 (Fp32Executor)", getattr(Fp32Executor, d.name) is d.fp32)
    _where(d, "emulated (EmulatedExecutor)", getattr(EmulatedExecutor, d.name) is d.emulated)
    _where(d, "torch (TorchExecutor)", getattr(TorchExecutor, d.name) is d.torch)
    _where(d, "tile_rules", [r[0] for r in kernel_rules(d.name, "npu2")] == [r[0] for r in d.tile_rules("npu2")])
    _where(d, "tile_default", DEFAULTS.get(d.name) is d.tile_default)
    _where(d, "harness_case", (d.name in HARNESS_KERNELS) == bool(d.harness_case))
    table = load_harness_table().harnesses
    if d.harness:  # each entry under its table key (the kernel's name, or `<name>@<contract>`)
        for key, entry in harness_entries(d.name, d.harness).items():
            _where(d, f"harness (harness table: {key})", table[key].command == entry["command"])
    else:  # declared absent: no entry of its own
        _where(d, "harness (absent: no table entry)", d.name not in table)
    if d.twin:  # each stand-in under its kind (the kernel's name, or the one it names)
        for kind, t in twin_kinds(d.name, d.twin):
            _where(d, f"twin (HARNESS_DIRS: {kind})", ((t.directory, kind) in {(x[0], x[1]) for x in HARNESS_DIRS})
                   == t.makefile)
            _where(d, f"twin (stand-in kinds: {kind})", kind in KINDS and STAND_INS[kind] is t)
    else:
        _where(d, "twin (absent: no stand-in)", d.name not in KINDS and d.name not in {x[1] for x in HARNESS_DIRS})
    _where(d, "cost_features (cost model)", d.name in MODELLED)
    _where(d, "constants (FITTED)", all(FITTED[k] == v for k, v in (d.constants or {}).items()))
    _where(d, "evidence (EVIDENCE)", all(EVIDENCE[k] == v for k, v in (d.evidence or {}).items()))
    page = d.registry_page
    if isinstance(page, dict):  # a page mlir-air added after e972f29: the importer's schema
        _where(d, "registry_page (importer)", LATER.get(d.name) is page)
    else:  # a page at e972f29 (or npu-ledger's own), or one per page: the projection's catalog entry, upstream's columns
        for key, p in catalog_pages(d.name, page):
            entry = spec_by_key(key)
            _where(d, f"registry_page (catalog entry: {key})", entry is not None and entry.kernel == d.name and (
                entry.page, entry.columns, entry.title) == (p.page, p.columns, p.title))
            if p.index:
                _where(d, f"registry_page (tables: {key})", INDEX[key] is p.index and DETAILS[key] is p.details
                       and PAGE_OF[key] == p.page and (key in NO_JSON) == p.no_json)
            else:  # upstream has no page of it: none of its tables lists it
                _where(d, "registry_page (absent upstream)", not ({key} & (set(INDEX) | set(DETAILS) | set(PAGE_OF)
                                                                           | set(NO_JSON) | set(LATER))))
            _where(d, f"registry_page (spellings: {key})", all(canonical_kernel(s) == d.name for s in p.spellings))


@pytest.mark.parametrize("d", DEFINITIONS, ids=IDS)
def test_a_registered_kernel_runs_through_its_declared_pieces(d):
    """At its small shape: the default tile passes its rules, the harness case's reference agrees with the FP32
    reference within the kernel's own tolerance, the emulated executor passes it, and every cost feature has a
    fitted constant; the twin's flags parse with the script's defaults."""
    import numpy as np

    from npu_kernels.numerics.executors import make_executor
    from npu_kernels.numerics.tile_rules import check_tile
    from npu_kernels.perf.constants import DERIVED, FITTED
    from npu_kernels.perf.kernel_model import kernel_features

    s = d.spec.normalize_shape(dict(d.spec.small_shape))
    tile = d.tile_default(s, "npu2")
    assert check_tile(d.name, s, tile, "npu2") == [], f"kernel {d.name}: tile_default breaks its tile_rules"
    if d.herd_of is not None:  # a herd other than [herd_x, herd_y]: the planner places that one
        from npu_kernels.numerics.tile_rules import herd_of

        assert herd_of(d.name, tile) == d.herd_of(tile), f"kernel {d.name}: herd_of (the planner's)"
    from npu_kernels.perf import modelled_kernel_figures

    figures = modelled_kernel_figures(d.name, s, tile)  # a compute-bound kernel's GFLOP/s, a streaming one's GB/s
    assert ("gflops" in figures) == (d.throughput == "gflops"), f"kernel {d.name}: throughput (modelled figures)"
    if d.dense_flops is not None:  # the figure divides the whole computation, masked work included (causal: 2x flops)
        flops = figures["gflops"] * figures["latency_us"] * 1e3
        assert abs(flops / d.dense_flops(s) - 1) < 1e-3, f"kernel {d.name}: dense_flops (modelled figures)"
    rtol, atol = d.tolerances[d.spec.default_contract]
    if d.harness_case:
        case = d.harness_case(s, d.spec.default_contract, tile)
        inputs, expected = case.inputs, case.reference
    else:  # mlir-air has no harness for it (declared absent): the catalog's own inputs and FP32 reference
        inputs = d.spec.make_inputs(s, 0)
        expected = d.spec.reference(inputs, s, d.spec.default_contract)
    out = d.spec.call(make_executor("emulated", "npu2"), inputs, s, d.spec.default_contract, None)
    assert np.allclose(out, expected, rtol=rtol, atol=atol), f"kernel {d.name}: emulated vs harness reference"
    ref = d.spec.reference(inputs, s, d.spec.default_contract)
    assert np.allclose(ref, expected, rtol=rtol, atol=atol), f"kernel {d.name}: FP32 vs harness reference"
    missing = set(kernel_features(d.name, s, tile)) - set(FITTED) - set(DERIVED)
    assert not missing, f"kernel {d.name}: cost features without a constant: {sorted(missing)}"
    for kind, t in twin_kinds(d.name, d.twin):
        p = argparse.ArgumentParser(prog=kind)
        t.add_flags(p)
        p.parse_args([])
    for key, page in catalog_pages(d.name, d.registry_page):  # a page at e972f29: one row of each table
        if not page.index:
            continue
        from registry.catalog import spec_by_key
        from registry.fold import ShapeRow
        from registry.mlir_air_tables import details_cells, index_cells

        entry = spec_by_key(key)
        row = ShapeRow(entry, tuple(s.items()), (), None, (), "failed", (), (), (), "")
        if page.catalog_shape is not None:  # its page's columns read back as the catalog's shape
            from registry.catalog import shape_key

            page_shape = dict(shape_key(entry, s))
            assert page.catalog_shape(page_shape) == s, f"kernel {d.name}: registry_page.catalog_shape"
        assert len(index_cells(key, row)) == len(page.index), f"kernel {d.name}: index_cells ({key})"
        for method, header in page.details:
            cells = details_cells(key, method, row)  # a table per method (GEMM's): None, no measurement of it
            assert (cells is None and method) or len(cells) == len(header), f"kernel {d.name}: details_cells ({key})"


# data that names a kernel where the registry cannot be asked: the one verdict exception the state machine re-derives
# (npu_kernels.thresholds.ATOL_ARTIFACT: the state machine imports thresholds and ledger only; checked below against
# the registry)
DATA = {"npu_kernels/thresholds.py": {"ATOL_ARTIFACT"}}


def _string_constants(path: Path, data: set[str] = frozenset()) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    skip = {id(c) for n in tree.body if isinstance(n, ast.Assign) and {getattr(t, "id", "") for t in n.targets} & data
            for c in ast.walk(n)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def test_the_atol_artifact_names_a_registered_kernel_and_its_contracts():
    from npu_kernels.thresholds import ATOL_ARTIFACT

    d = registry.get(ATOL_ARTIFACT["kernel"])
    assert d is not None and set(ATOL_ARTIFACT["contracts"]) <= set(d.spec.contracts), ATOL_ARTIFACT


def test_no_other_room_spells_a_registered_kernels_name():
    names = set(IDS)
    found = []
    for package in ("npu_kernels", "handlers", "registry", "statemachine", "ledger"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("npu_kernels/numerics/kernels/") or rel.startswith(USERS):
                continue
            found += [f"{rel}:{line}: {value!r}" for line, value in _string_constants(path, DATA.get(rel, set()))
                      if value in names]
    assert not found, "a registered kernel's name outside its module (ask npu_kernels.numerics.kernels):\n" + "\n".join(found)


BELOW_THE_REGISTRY = ("npu_kernels.numerics.spec", "npu_kernels.numerics.bf16", "npu_kernels.numerics.references",
                      "npu_kernels.numerics.harness_case", "npu_kernels.numerics.tile_common", "npu_kernels.thresholds",
                      "npu_kernels.numerics.kernels.base")


@pytest.mark.parametrize("d", DEFINITIONS, ids=IDS)
def test_a_kernel_module_imports_only_the_numerics_below_the_registry_at_its_top(d):
    """At import time a kernel module needs nothing the registry's users import (no cycle through the executors,
    the catalog or the planner); the executors' datapath library only inside a function, at call time."""
    tree = ast.parse((ROOT / "npu_kernels" / "numerics" / "kernels" / f"{d.name}.py").read_text())
    project = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(
        ("npu_kernels", "registry", "handlers"))]
    assert project and all(m in BELOW_THE_REGISTRY for m in project), f"kernel {d.name} imports {project}"
