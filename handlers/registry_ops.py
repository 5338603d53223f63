"""Registry handlers: import mlir-air registry files into the ledger, write or check the projections.

`import_registry_accounted(ledger, dir, allow_skip)` appends the `KernelVerified` events of every `*.json` in
`dir` (sorted by name) and of every tested-shapes table (registry.importer_scan) to the `registry:import`
stream and returns how many were new plus one account per table (rows read, imported, duplicate, skipped with
why); with a skipped row and no `allow_skip` it appends nothing and raises `SkippedRows`. Ids are
deterministic, so ids the ledger already holds are left out and a second import appends nothing.
`import_registry(ledger, dir)` is that with skips allowed, returning the count.

`build_projections(events, out_dir, check=False)` writes `project_all(events)` under `out_dir` (creating
directories; a file is rewritten only when its bytes changed; a write that fails leaves no temporary file),
or with `check=True` writes nothing and lists every projected file that is missing or differs on disk (a
hand edit), every file in a projection folder that no projection writes (`stray`: a leftover, a deleted
deployment's page, a temporary file), and deployments whose names project to one llms/ folder (`clashes`).

Projections are written only inside `out_dir`: a projected path that passes through a symbolic link below it
(`llms/<model>/docs` replaced by a link to a folder elsewhere, or a file replaced by one) is neither written nor
read through; it is listed in `links` (the build and the check both report it, and the result is not clean)
and the link is left as it is for a person to remove.
"""

from __future__ import annotations

import json
import os
import threading

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

from handlers.inputs import input_file
from ledger.events import NewEvent
from ledger.record import RecordedEvent
from registry.catalog import BEST_CONFIG_KERNEL, gemm_output_dtype
from registry.importer import IMPORT_STREAM, events_from_upstream
from registry.importer_sweep_gemm import events_from_sweep_gemm, is_sweep_gemm
from registry.importer_scan import TableAccount, read_markdown
from registry.model_docs import model_dir_name
from registry.model_fold import DeploymentView
from registry.projections import deployments, project_all


@dataclass(frozen=True)
class BuildResult:
    written: tuple[str, ...]  # relpaths whose bytes were (re)written (build mode)
    differing: tuple[str, ...]  # relpaths missing or different on disk (before writing, or in check mode)
    missing: tuple[str, ...] = field(default=())  # the subset of `differing` not on disk at all
    total: int = 0  # files in the projection
    stray: tuple[str, ...] = ()  # check mode: files in projection folders that no projection writes
    clashes: tuple[str, ...] = ()  # check mode: "llms/<folder>/: 'a', 'b'" for names sharing a folder
    links: tuple[str, ...] = ()  # relpaths below out_dir that are symbolic links a projection would pass through

    @property
    def clean(self) -> bool:
        return not self.differing and not self.stray and not self.clashes and not self.links


class _Links:
    """Which relative paths below `out` are, or pass through, a symbolic link (each prefix looked at once)."""

    def __init__(self, out: Path) -> None:
        self.out, self._is_link = out, {}

    def first(self, rel: str) -> str | None:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self._is_link:
                self._is_link[sub] = self.out.joinpath(*parts[:i]).is_symlink()
            if self._is_link[sub]:
                return sub
        return None


def _projection_folders(out: Path, files) -> set[Path]:
    """The folders projections write into: those of the projected files, plus every llms/<x>/ on disk."""
    folders = {out.joinpath(*rel.split("/")).parent for rel in files}
    llms = out / "llms"
    if llms.is_dir():
        for model in llms.iterdir():
            if model.is_dir():
                folders |= {model, model / "docs", model / "docs" / "development_progress"}
    return folders


def _stray(out: Path, files, links: _Links) -> list[str]:
    projected = {out.joinpath(*rel.split("/")) for rel in files}
    found = []
    for folder in _projection_folders(out, files):
        if folder.is_dir() and (folder == out or not links.first(folder.relative_to(out).as_posix())):
            found += [p.relative_to(out).as_posix() for p in folder.iterdir() if p.is_file() and p not in projected]
    return sorted(found)


def _clashes(events) -> list[str]:
    by_folder: dict[str, list[str]] = {}
    for name in deployments(events):
        by_folder.setdefault(model_dir_name(name).lower(), []).append(name)
    return [f"llms/{model_dir_name(names[0])}/ is the folder of {len(names)} deployments: "
            + ", ".join(repr(n) for n in names) for names in by_folder.values() if len(names) > 1]


@dataclass(frozen=True)
class ImportResult:
    added: int  # events new to the ledger
    accounts: tuple[TableAccount, ...]  # one per table read (markdown tables, and one per GEMM JSON file)

    @property
    def skipped(self) -> int:
        return sum(len(a.skipped) for a in self.accounts)


def import_registry_accounted(ledger, directory: str | Path, allow_skip: bool = False,
                              sweep_dtype: str = "bf16") -> ImportResult:
    """Import an mlir-air registry: its `kernel_registry/` folder as it is (details/*.json for GEMM, and every
    tested-shapes markdown table, registry.importer_scan), or a folder of registry JSON files (details/ itself);
    a JSON file there that is sweep_gemm.py's results or --emit list is read as that (registry.importer_sweep_gemm:
    the rows of a new M, for the registry of `sweep_dtype`, the script's --dtype).
    Every row read is accounted for; when any was skipped and not `allow_skip`, nothing is appended and
    `SkippedRows` (carrying the accounts) is raised. Idempotent: a second import adds nothing."""
    directory = Path(directory)
    details = directory / "details" if (directory / "details").is_dir() else directory
    root = directory if details != directory else None  # given details/ itself: its JSON only, as before
    pages = [root / "supported_kernels.md", *details.glob("*.md")] if root is not None else []
    for path in [*details.glob("*.json"), *pages]:  # the files the importer reads: regular, under a cap
        if path.exists() or path.is_symlink():
            input_file(path, "registry file")
    files = sorted(p for p in details.glob("*.json") if p.is_file())
    from_json, accounts = [], []
    docs = {path: _json_doc(path) for path in files}
    herds = {d.get("output_dtype"): d.get("herd") for d in docs.values() if isinstance(d, dict)}
    for path in files:
        if is_sweep_gemm(docs[path]):  # sweep_gemm.py's rows at a new M (registry.importer_sweep_gemm)
            pairs, read = events_from_sweep_gemm(path, sweep_dtype, herds.get(sweep_dtype))
            header = "(sweep_gemm.py JSON)"
        else:
            pairs, header = events_from_upstream(path), "(JSON)"
            read = sum(len(s.get("methods") or {}) for s in _json_shapes(docs[path]))
        from_json += pairs
        accounts.append(TableAccount(kernel=BEST_CONFIG_KERNEL, file=path.relative_to(directory).as_posix(), header=header,
                                     read=read, imported=len(pairs)))
    json_shapes = {(gemm_output_dtype(e.contract), *e.shape.values()) for _, e in from_json}
    markdown, md_accounts = read_markdown(root, json_shapes) if root is not None else ([], [])
    accounts += md_accounts
    if not files and not markdown and not any(a.read for a in md_accounts):
        raise FileNotFoundError(f"no registry JSON files (*.json) or tested-shapes tables in {directory}")
    result = ImportResult(added=0, accounts=tuple(accounts))
    if result.skipped and not allow_skip:
        raise SkippedRows(result)
    existing = {e.event_id for e in ledger.read_stream(IMPORT_STREAM)}
    new: list[NewEvent] = []
    for event_id, event in from_json + markdown:
        if event_id not in existing:
            existing.add(event_id)
            new.append(NewEvent(event=event, event_id=event_id))
    if new:
        ledger.append(IMPORT_STREAM, ledger.stream_version(IMPORT_STREAM), new)
    return ImportResult(added=len(new), accounts=tuple(accounts))


class SkippedRows(ValueError):
    """Rows were read that could not be imported; nothing was appended (`result.accounts` says which and why)."""

    def __init__(self, result: ImportResult) -> None:
        tables = [f"{a.file} ({a.kernel}: {len(a.skipped)} of {a.read})" for a in result.accounts if a.skipped]
        super().__init__(f"{result.skipped} row(s) not imported, in {', '.join(tables)}; nothing was imported "
                         "(--allow-skip imports the rest)")
        self.result = result


def _json_doc(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        return None  # the importer names the file that is not JSON


def _json_shapes(doc: Any) -> list[dict]:
    return [s for s in (doc.get("shapes") if isinstance(doc, dict) else None) or [] if isinstance(s, dict)]


def import_registry(ledger, directory: str | Path) -> int:
    """`import_registry_accounted` with skipped rows allowed: the number of events added."""
    return import_registry_accounted(ledger, directory, allow_skip=True).added


def build_projections(events: Sequence[RecordedEvent], out_dir: str | Path, check: bool = False,
                      only: Collection[str] | None = None, folded: Iterable[DeploymentView] = ()) -> BuildResult:
    """Write the projections under `out_dir`, or (check=True) compare them with what is on disk; with `only`, the
    registry and those deployments' docs alone, with `folded` the views a command folded already
    (`registry.projections.project_all`)."""
    out = Path(out_dir)
    files = project_all(events, only, folded)
    differing, missing, written, linked = [], [], [], set()
    links = _Links(out)
    for rel, data in files.items():
        link = links.first(rel)
        if link is not None:  # never written nor read through a link: it may lead out of the workspace
            linked.add(link)
            continue
        target = out.joinpath(*rel.split("/"))
        if not target.is_file():
            missing.append(rel)
            differing.append(rel)
        elif target.read_bytes() != data:
            differing.append(rel)
        else:
            continue
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            # a name of this writer's own: two processes refreshing the projections at once (a racing
            # `ledger advance`) must not rename each other's temporary file away
            tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                tmp.write_bytes(data)
                tmp.replace(target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            written.append(rel)
    extra = {"stray": tuple(_stray(out, files, links)), "clashes": tuple(_clashes(events))} if check else {}
    return BuildResult(written=tuple(written), differing=tuple(differing), missing=tuple(missing), total=len(files),
                       links=tuple(sorted(linked)), **extra)


def link_message(out: str | Path, rel: str) -> str:
    """One line naming a symbolic link the projections refused to pass through, and where it leads."""
    try:
        target = os.readlink(Path(out).joinpath(*rel.split("/")))
    except OSError:
        target = "?"
    return (f"{rel} is a symbolic link (to {target}): projections are written only inside the workspace, "
            "nothing was written or compared through it; replace it by a folder (or remove it) and rebuild")
