"""The registry data fold: every `KernelVerified` in the ledger -> per-kernel, per-shape rows.

`fold_registry(events)` is a pure function of the events (any streams, seq order). It promises:

* one `ShapeRow` per (page, shape), pages in catalog order, rows in the order their shape was first
  measured (lowest seq) — never dict or set iteration order, never the clock;
* every measurement kept (`ShapeRow.measurements`, seq order) with its evidence class, from the provenance
  re-derived from the row's recorded facts (npu_kernels.provenance; a row's own `provenance_class` claim is never
  believed, a disagreement is kept as `claim_mismatch` for the evaluator): `hardware` (npu2-measured: a harness
  run naming its device and a probed toolchain, not on a stand-in checkout), `imported` (mlir-air's own registry
  JSON), `rehearsal` (a `ledger twin` checkout), `unattested` (a harness run with no device / toolchain
  reported), or `emulated` / `torch`;
* `best` = the fastest PASS among hardware/imported evidence; only when a shape has no hardware PASS at all
  does another PASS become `best`, and then `best.evidence` says which (status 🎭 / ❔ / 🧪): the projections never
  show it as verified, and the JSON and the lookup never hand it out. A rehearsal, unattested or emulated
  throughput is not an NPU2 figure: it never outranks a number measured on NPU2;
* "Used by" = the union of `<deployment> <role>` (deployment from the `deployment:<name>` stream id) and
  the `role` text of streams without a deployment (imported rows carry upstream's `used_by` there),
  in first-seen order;
* the registry is NPU2-scoped, as mlir-air's is: rows recorded for another target (npu1) are left to the
  per-model docs;
* a row whose figures fail `npu_kernels.perf.evidence.check_stored_row` (one appended behind the recorder's back)
  is `implausible`: it never passes, is never `best`, and its row carries a caveat naming the seq and why;
* a GEMM harness row whose method is not one mlir-air's lookup keys rows by for its contract (none recorded, say:
  an older ledger's `record harness` without `--method`) is `unkeyed`: kept apart in the same way, never `best`,
  never in the JSON's `shapes`, its caveat naming the seq and the methods known;
* a status per row: `verified` (hardware PASS), `caveat` (hardware PASS plus a recorded caveat: a hardware
  FAIL of another config, only the low-precision tier verified, tiles below target without a
  justification), `failed` (no PASS, or hardware evidence that only FAILs), `unattested` / `rehearsal` /
  `emulated` (PASS on that evidence only, no NPU2 evidence).

Payloads are read as plain dicts with the `KernelVerified` field defaults (the recorder validated them on
the way in), which keeps a rebuild over tens of thousands of rows close to the cost of reading them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from npu_kernels.numerics.kernels import piece
from npu_kernels.perf.evidence import check_stored_row
from npu_kernels.provenance import (IMPORTED_REGISTRY, NPU2_MEASURED, STANDIN_REHEARSAL, UNATTESTED, claim_problem,
                                kernel_row_provenance)
from ledger.events import KernelVerified
from ledger.record import RecordedEvent
from registry.catalog import (CATALOG, CatalogEntry, Shape, Tolerance, contract_tier, gemm_lookup_methods, shape_key,
                              spec_for, throughput)
from ledger.streams import deployment_name

HARDWARE = ("hardware", "imported")
KERNEL_EVENT = "KernelVerified"

_DEFAULTS: dict[str, Any] = {}
for _name, _field in KernelVerified.model_fields.items():
    if not _field.is_required():
        _DEFAULTS[_name] = _field.get_default(call_default_factory=True)


@dataclass(frozen=True, slots=True)
class RegistryMeasurement:
    """One `KernelVerified`, normalised for the registry."""

    seq: int
    event_id: str
    stream_id: str
    deployment: str | None
    spec: CatalogEntry
    shape: Shape
    contract: str
    tier: str
    method: str  # registry method name; emulated/torch rows are named so (`emulated`, `torch:drain`)
    evidence: str  # hardware | imported | emulated | torch
    executor: str
    source: str
    verdict: str
    rtol: float
    atol: float
    mean_rel_L1: float | None
    max_abs: float | None
    max_rel: float | None
    mismatches: int | None
    gflops: float | None
    latency_us: float | None
    throughput: float | None
    tile: dict[str, Any]
    herd: tuple[int, ...] | None
    tiles_in_flight: int | None
    tiles_target: int | None
    tile_justification: str
    role: str
    stage: str
    used_by: str
    note: str
    measured: str  # YYYY-MM[-DD]
    provenance: dict[str, Any] = field(repr=False)
    caveat: str = ""  # e.g. near-zero-atol-artifact: a FAIL verdict the Phase 1 gate accepts (see statemachine)
    provenance_class: str = ""  # re-derived from the row's facts (npu_kernels.provenance.kernel_row_provenance)
    claim_mismatch: str = ""  # the row's recorded provenance_class disagrees with its facts (the evaluator's finding)
    implausible: str = ""  # npu_kernels.perf.evidence.check_stored_row's problem: never passed, never best
    unkeyed: str = ""  # a GEMM harness row whose method mlir-air's lookup does not know: kept apart, never best

    @property
    def counted(self) -> bool:
        """False for a row the registry keeps apart: implausible figures, or a method mlir-air cannot key it by."""
        return not (self.implausible or self.unkeyed)

    @property
    def passed(self) -> bool:
        """PASS, or a FAIL verdict carrying the documented near-zero atol caveat (accepted, shown as a caveat);
        never a row whose figures fail the plausibility check on read."""
        if not self.counted:
            return False
        return self.verdict == "PASS" or self.caveat == "near-zero-atol-artifact"

    @property
    def on_hardware(self) -> bool:
        return self.evidence in HARDWARE


@dataclass(frozen=True)
class ShapeRow:
    spec: CatalogEntry
    shape: Shape
    measurements: tuple[RegistryMeasurement, ...]
    best: RegistryMeasurement | None
    used_by: tuple[str, ...]
    status: str  # verified | caveat | failed | emulated
    caveats: tuple[str, ...]
    contracts: tuple[str, ...]
    methods: tuple[str, ...]
    measured: str

    @property
    def first_seq(self) -> int:
        return self.measurements[0].seq

    def representatives(self) -> tuple[RegistryMeasurement, ...]:
        """One measurement per (contract, method, evidence): its best PASS, else its latest run."""
        groups: dict[tuple[str, str, str], list[RegistryMeasurement]] = {}
        for m in self.measurements:
            groups.setdefault((m.contract, m.method, m.evidence), []).append(m)
        reps = [pick_best(ms) or ms[-1] for ms in groups.values()]
        return tuple(sorted(reps, key=lambda m: (_EVIDENCE_ORDER.get(m.evidence, 9), m.tier, m.contract, m.method)))


@dataclass(frozen=True)
class KernelPage:
    spec: CatalogEntry
    rows: tuple[ShapeRow, ...]
    columns: tuple[str, ...]  # shape columns present in at least one row
    tolerances: tuple[tuple[Tolerance, int], ...]  # (tolerance, number of events) as recorded
    n_events: int

    @property
    def best(self) -> tuple[ShapeRow, RegistryMeasurement] | None:
        """The fastest best-config over the page (hardware evidence first)."""
        cands = [(row, row.best) for row in self.rows if row.best is not None]
        if not cands:
            return None
        return max(cands, key=lambda rb: rank(rb[1]))


@dataclass(frozen=True)
class RegistryData:
    pages: tuple[KernelPage, ...]
    n_events: int
    last_seq: int

    def page(self, key: str) -> KernelPage:
        for p in self.pages:
            if p.spec.key == key:
                return p
        raise KeyError(f"no registry page {key!r}; pages: {[p.spec.key for p in self.pages]}")


_EVIDENCE_ORDER = {"hardware": 0, "imported": 1, "rehearsal": 2, "unattested": 3, "emulated": 4, "torch": 5}


# the registry's evidence class of each provenance (npu_kernels.provenance): only the first two count as NPU2
_EVIDENCE_OF_CLASS = {NPU2_MEASURED: "hardware", IMPORTED_REGISTRY: "imported", STANDIN_REHEARSAL: "rehearsal",
                      UNATTESTED: "unattested"}


# how a row that is not an NPU2 figure is marked wherever it is shown: (glyph, what it is); in the order a shape
# with several such kinds of evidence is named by (a harness run first, the CPU last)
NOT_NPU2 = {"unattested": ("❔", "unattested harness run, not NPU2"), "rehearsal": ("🎭", "stand-in rehearsal, not NPU2"),
            "emulated": ("🧪", "CPU emulator, not NPU2"), "torch": ("🧪", "torch on CPU, not NPU2")}


def not_npu2_mark(m: "RegistryMeasurement") -> str:
    """`🎭 stand-in rehearsal, not NPU2` (etc.) for a row whose figures are not NPU2 measurements; "" for one that is."""
    if m.on_hardware:
        return ""
    glyph, what = NOT_NPU2.get(m.evidence, ("🧪", f"{m.evidence}, not NPU2"))
    return f"{glyph} {what}"


def evidence_of(source: str, executor: str, provenance_class: str = "") -> str:
    """The row's evidence class from its re-derived provenance (never from what the row claims): hardware
    (npu2-measured), imported (mlir-air's registry), rehearsal (a stand-in checkout), unattested (a harness run
    with no device / toolchain reported), emulated or torch (CPU executors)."""
    if provenance_class in _EVIDENCE_OF_CLASS:
        return _EVIDENCE_OF_CLASS[provenance_class]
    if source in ("emulated", "torch"):
        return source
    return "torch" if executor == "torch" else "emulated"


def method_name(evidence: str, method: str, executor: str) -> str:
    """The method key as the registry shows it: provenance is plain in the name for non-hardware rows."""
    if evidence in HARDWARE:
        return method or executor or "harness"
    return f"{evidence}:{method}" if method else evidence


def rank(m: RegistryMeasurement) -> tuple:
    """Sort key for 'best': hardware before emulated, then throughput, then lower latency, then earlier seq."""
    tp = m.throughput
    lat = m.latency_us
    return (
        m.on_hardware,
        tp is not None,
        tp if tp is not None else 0.0,
        -(lat if lat is not None else float("inf")),
        -m.seq,
    )


def pick_best(ms: Iterable[RegistryMeasurement]) -> RegistryMeasurement | None:
    passing = [m for m in ms if m.passed]
    return max(passing, key=rank) if passing else None


def measurement(rec: RecordedEvent) -> RegistryMeasurement:
    """Normalise one recorded `KernelVerified` (payload read with the event's defaults)."""
    p = {**_DEFAULTS, **rec.payload}
    get = p.__getitem__
    contract = get("contract")
    spec = spec_for(get("kernel"), contract)
    shape = shape_key(spec, get("shape") or {})
    executor = get("executor")
    source = get("source")
    derived = kernel_row_provenance(p)
    evidence = evidence_of(source, executor, derived)
    deployment = deployment_name(rec.stream_id)
    role = get("role") or ""
    if deployment:
        used_by = f"{deployment} {role}".strip()
    else:
        used_by = role
    herd = get("herd")
    gflops, latency = get("gflops"), get("latency_us")
    return RegistryMeasurement(
        seq=rec.seq, event_id=rec.event_id, stream_id=rec.stream_id, deployment=deployment, spec=spec,
        shape=shape, contract=contract, tier=contract_tier(contract, get("tier") or ""),
        method=method_name(evidence, get("method") or "", executor), evidence=evidence, executor=executor,
        source=source, verdict=get("verdict"), rtol=get("rtol"), atol=get("atol"),
        mean_rel_L1=get("mean_rel_L1"), max_abs=get("max_abs"), max_rel=get("max_rel"),
        mismatches=get("mismatches"), gflops=gflops, latency_us=latency,
        throughput=throughput(spec, shape, gflops, latency), tile=dict(get("tile") or {}),
        herd=tuple(herd) if herd is not None else None, tiles_in_flight=get("tiles_in_flight"),
        tiles_target=get("tiles_target"), tile_justification=get("tile_justification") or "",
        role=role, stage=get("stage") or "", used_by=used_by, note=get("note") or "",
        measured=get("measured_at") or rec.recorded_at[:10], provenance=dict(get("provenance") or {}),
        caveat=get("caveat") or "", provenance_class=derived,
        claim_mismatch=claim_problem(get("provenance_class"), derived) or "",
        implausible="; ".join(check_stored_row(p)),
        unkeyed=unkeyed_method(spec, evidence, contract, get("tier") or "", get("method") or "")
        if get("verdict") == "PASS" or get("caveat") == "near-zero-atol-artifact" else "",
    )


def unkeyed_method(spec: CatalogEntry, evidence: str, contract: str, tier: str, method: str) -> str:
    """Why a GEMM harness row cannot be filed under a method mlir-air's lookup knows ("" when it can): the JSON
    keys `methods` and `best` by that name (registry.catalog.GEMM_LOOKUP_METHODS). Only our own passing harness
    rows are judged (a FAIL is never filed there): an imported row's method is mlir-air's own name for it."""
    if not piece(spec.kernel, "method_tier") or evidence != "hardware":
        return ""
    known = gemm_lookup_methods(contract, tier)
    if method in known:
        return ""
    said = f"method {method[:40]!r}" if method else "no method recorded"
    return (f"{said}, and mlir-air's lookup knows a {contract} GEMM only as {' / '.join(known) or 'nothing'}; "
            "record it again with `ledger record harness ... --method M`")


def _caveats(spec: CatalogEntry, ms: Sequence[RegistryMeasurement]) -> tuple[str, ...]:
    hw = [m for m in ms if m.on_hardware and m.counted]
    hw_pass = [m for m in hw if m.passed]
    out: list[str] = []
    failed = sorted({(m.contract, m.method) for m in hw if not m.passed} - {(m.contract, m.method) for m in hw_pass})
    for contract, method in failed:
        seqs = [m.seq for m in hw if (m.contract, m.method) == (contract, method)]
        out.append(f"{method} ({contract}) FAILs on NPU2 (seq {', '.join(map(str, seqs))})")
    for m in ms:
        if m.implausible:
            out.append(f"seq {m.seq} refused as implausible, not counted: {m.implausible}")
        elif m.unkeyed:
            out.append(f"seq {m.seq} kept apart, never best and not in the JSON: {m.unkeyed}")
    artifact = [m.seq for m in ms if m.caveat == "near-zero-atol-artifact" and not m.implausible]
    if artifact:
        out.append("FAIL at rtol/atol only on a handful of near-zero-reference elements (atol artifact, mean_rel_L1 "
                   f"in tier; accepted as mlir-air's registry does; seq {', '.join(map(str, artifact))})")
    warned = [m for m in ms if m.caveat == "upstream-warning"]
    if warned:
        out.append(f"mlir-air's registry marks it {warned[0].provenance.get('status_text') or '⚠️'} "
                   f"(imported, seq {', '.join(str(m.seq) for m in warned)})")
    if spec.key == "gemm_bf16" and hw_pass and not any(m.tier == "high" for m in hw_pass):
        out.append("only the low-precision tier is verified")
    for m in hw_pass:
        if (
            m.tiles_in_flight is not None and m.tiles_target is not None
            and m.tiles_in_flight < m.tiles_target and not m.tile_justification
        ):
            out.append(f"{m.method}: {m.tiles_in_flight}/{m.tiles_target} tiles with no justification (seq {m.seq})")
    return tuple(out)


def _status(ms: Sequence[RegistryMeasurement], caveats: Sequence[str]) -> str:
    hw = [m for m in ms if m.on_hardware and m.counted]
    if hw:
        if not any(m.passed for m in hw):
            return "failed"
        return "caveat" if caveats else "verified"
    for evidence in NOT_NPU2:
        if any(m.passed and m.evidence == evidence for m in ms):
            return "emulated" if evidence == "torch" else evidence
    return "failed"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return tuple(seen)


def _used_by(ms: Sequence[RegistryMeasurement]) -> tuple[str, ...]:
    """Deployments grouped with their roles (`smollm2 Q proj, O proj`), then role-only entries, first-seen order."""
    by_deployment: dict[str, list[str]] = {}
    entries: list[tuple[str, str]] = []  # (kind, key) in first-seen order
    for m in ms:
        if m.deployment:
            if m.deployment not in by_deployment:
                by_deployment[m.deployment] = []
                entries.append(("d", m.deployment))
            if m.role and m.role not in by_deployment[m.deployment]:
                by_deployment[m.deployment].append(m.role)
        elif m.role:
            entries.append(("r", m.role))
    out = []
    for kind, key in entries:
        if kind == "d":
            roles = by_deployment[key]
            out.append(f"{key} {', '.join(roles)}" if roles else key)
        else:
            out.append(key)
    return _unique(out)


def shape_row(spec: CatalogEntry, shape: Shape, ms: Sequence[RegistryMeasurement]) -> ShapeRow:
    ms = tuple(sorted(ms, key=lambda m: m.seq))
    caveats = _caveats(spec, ms)
    return ShapeRow(
        spec=spec, shape=shape, measurements=ms, best=pick_best(ms), used_by=_used_by(ms),
        status=_status(ms, caveats), caveats=caveats, contracts=_unique(sorted(m.contract for m in ms)),
        methods=_unique(sorted(m.method for m in ms)), measured=max(m.measured for m in ms),
    )


def _tolerances(ms: Sequence[RegistryMeasurement]) -> tuple[tuple[Tolerance, int], ...]:
    counts: dict[tuple[str, float, float], int] = {}
    for m in ms:
        key = (m.contract, float(m.rtol), float(m.atol))
        counts[key] = counts.get(key, 0) + 1
    return tuple((Tolerance(*key), counts[key]) for key in sorted(counts))


def fold_registry(events: Iterable[RecordedEvent]) -> RegistryData:
    """Fold every `KernelVerified` into registry pages (see the module docstring for the promises)."""
    groups: dict[tuple[str, Shape], list[RegistryMeasurement]] = {}
    specs: dict[str, CatalogEntry] = {spec.key: spec for spec in CATALOG}
    n, last = 0, 0
    for rec in events:
        if rec.type != KERNEL_EVENT or rec.payload.get("target", "npu2") != "npu2":
            continue
        m = measurement(rec)
        if m.spec.key not in specs:
            specs[m.spec.key] = m.spec
        groups.setdefault((m.spec.key, m.shape), []).append(m)
        n, last = n + 1, max(last, rec.seq)
    per_page: dict[str, list[ShapeRow]] = {}
    for (key, shape), ms in groups.items():
        per_page.setdefault(key, []).append(shape_row(specs[key], shape, ms))
    order = [spec.key for spec in CATALOG] + sorted(k for k in specs if k not in {s.key for s in CATALOG})
    pages = []
    for key in order:
        spec = specs[key]
        rows = tuple(sorted(per_page.get(key, []), key=lambda r: (r.first_seq, r.shape)))
        present = {c for r in rows for c, _ in r.shape}
        columns = tuple(c for c in spec.columns if c in present) + tuple(
            sorted(c for c in present if c not in spec.columns)
        )
        all_ms = [m for r in rows for m in r.measurements]
        pages.append(KernelPage(spec=spec, rows=rows, columns=columns, tolerances=_tolerances(all_ms),
                                n_events=len(all_ms)))
    return RegistryData(pages=tuple(pages), n_events=n, last_seq=last)
