"""The mlir-air contract: the formats npu-ledger depends on in an mlir-air checkout, pinned, and a check of a checkout.

The pinned formats are `contract.toml` beside this module (each entry: upstream file, the lines and commit it was
read at, what must be there) plus the harness Makefiles' variables and targets, taken from the commands of
`harnesses.toml` (what the tool runs is what is checked; those Makefiles are cited there and in the twin's
`HARNESS_DIRS`). The registry's table headers are added by the caller (`registry.mlir_air_tables` owns them;
`table_checks` turns them into checks), because this module sits below the registry.

* `CONTRACT_VERSION`: the toml's `version`; recorded with every mlir-air toolchain (`mlir_air_contract`).
* `NIGHTLY`: the nightly's ndjson files (perf-history branch, not in a checkout) as the toml pins them.
* `contract_checks()`: every `Check` of the toml and of the harness table.
* `check_checkout(dir, extra)`: one `ContractFinding` per check (status `ok`, `differs`, `missing` or `n/a`), reading a real
  checkout's files, or in a `ledger twin` directory the file that plays the part (`Check.twin`); a check with
  `since` (a file added after the contract's commit, e.g. the 4-bit dequant harness) is `n/a` where the file is absent
  (`as_json()["since"]`: `ledger doctor` names the commit it was read at, so an older checkout is told what came after).
* `usable_checkout(dir)`: None when `dir` can be run against, else one line saying why not (unset, not an
  mlir-air checkout, a check that fails) — the preflight of `ledger advance --executor mlir-air`.

Imports: the standard library and npu_kernels.mlir_air.checkout only.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from npu_kernels.mlir_air.checkout import ROOT, is_twin
from npu_kernels.mlir_air.table import default_table_data

HERE = Path(__file__).resolve().parent
_TOML = tomllib.loads((HERE / "contract.toml").read_text(encoding="utf-8"))
CONTRACT_VERSION: int = int(_TOML["version"])
CONTRACT_COMMIT: str = _TOML["commit"]
# mlir-air's nightly ndjson files ([nightly.<series>] of the toml: file, fields in order with types, statuses); read by
# registry.nightly_history, which builds its line schemas from them
NIGHTLY: dict[str, dict] = dict(_TOML.get("nightly", {}))
_MAKE = re.compile(r"make -C \{mlir_air\}/(?P<dir>\S+) (?P<target>[\w-]+)(?P<rest>.*)")


@dataclass(frozen=True)
class Check:
    what: str
    file: str  # below the checkout
    at: str  # where upstream says it, and at which commit
    kind: str  # contains | flags | fields | make_vars | targets | table_headers
    items: tuple = ()
    twin: str = "same"  # "same", a path in the npu-ledger checkout, or "" (no such file in a twin)
    twin_items: tuple | None = None  # what the twin's file must hold, when it spells the format differently
    since: str = ""  # a commit later than the contract's: a checkout without the file is n/a, not missing


@dataclass(frozen=True)
class ContractFinding:
    check: Check
    status: str  # ok | differs | missing | n/a
    absent: tuple = ()  # items not found
    read: str = ""  # the file that was read

    @property
    def fails(self) -> bool:
        return self.status in ("differs", "missing")

    def as_json(self) -> dict:
        c = self.check
        return {"file": c.file, "what": c.what, "kind": c.kind, "at": c.at, "status": self.status,
                "absent": [" | ".join(a) if isinstance(a, tuple) else a for a in self.absent], "read": self.read,
                "since": c.since or None}


def _harness_checks() -> list[Check]:
    """Makefile variables / targets and script files the commands of harnesses.toml use; an entry's `since` (a
    harness mlir-air added after the contract's commit) makes its Makefile n/a on a checkout that predates it."""
    table = default_table_data()
    wanted: dict[str, tuple[set, set, set]] = {}
    for entry in table.get("harness", {}).values():
        for key in ("command", "latency_command"):
            for m in _MAKE.finditer(entry.get(key, "")):
                names, targets, since = wanted.setdefault(m["dir"], (set(), set(), set()))
                names.update(re.findall(r"\b([A-Z][A-Z0-9_]*)=", m["rest"].split("&&")[0]))
                targets.add(m["target"])
                since.add(entry.get("since", ""))
    out = []
    for rel in sorted(wanted):
        names, targets, since = wanted[rel]
        later = min(since) if "" not in since else ""  # one entry at the contract's commit: the Makefile is required
        at = f"{(later or CONTRACT_COMMIT)[:7]} {rel}/Makefile (cited in harnesses.toml and twin HARNESS_DIRS)"
        out.append(Check(what="harness Makefile variables (harnesses.toml)", file=f"{rel}/Makefile", at=at,
                         kind="make_vars", items=tuple(sorted(names)), since=later))
        out.append(Check(what="harness Makefile targets (harnesses.toml)", file=f"{rel}/Makefile", at=at,
                         kind="targets", items=tuple(sorted(targets)), since=later))
    return out


@lru_cache(maxsize=1)
def contract_checks() -> tuple[Check, ...]:
    from_toml = [Check(what=c["what"], file=c["file"], at=c["at"], kind=c["kind"], items=tuple(c["items"]),
                       twin=c.get("twin", "same"),
                       twin_items=tuple(c["twin_items"]) if "twin_items" in c else None, since=c.get("since", ""))
                 for c in _TOML["check"]]
    return tuple(_harness_checks() + from_toml)


def table_checks(files: dict[str, list[tuple[str, ...]]], at: str) -> list[Check]:
    """Checks that each markdown file (below the checkout) holds these table headers; absent in a twin."""
    return [Check(what="registry tested-shapes table headers", file=rel, at=at, kind="table_headers",
                  items=tuple(headers), twin="") for rel, headers in files.items()]


def _cells(line: str) -> tuple[str, ...]:
    body = line.strip()
    body = body[1:-1] if body.endswith("|") else body[1:]
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body))


def _present(kind: str, text: str, item) -> bool:
    if kind == "contains":
        return item in text
    if kind == "flags":
        return f'"{item}"' in text or f"'{item}'" in text
    if kind == "fields":
        return bool(re.search(rf"^\s*{re.escape(item)}\s*:", text, re.M)) or f'"{item}"' in text or f"'{item}'" in text
    if kind == "make_vars":
        return f"$({item})" in text or bool(re.search(rf"^\s*{re.escape(item)}\s*[?:+]?=", text, re.M))
    if kind == "targets":
        return bool(re.search(rf"^{re.escape(item)}\s*:", text, re.M))
    if kind == "table_headers":
        return tuple(item) in {_cells(ln) for ln in text.split("\n") if ln.lstrip().startswith("|")}
    raise ValueError(f"unknown contract check kind {kind!r}")


def check_checkout(directory: str | Path, extra: list[Check] | tuple = ()) -> list[ContractFinding]:
    """One ContractFinding per check of the contract (and `extra`), in order, for the checkout at `directory`."""
    root = Path(directory)
    twin = is_twin(root)
    out = []
    for check in (*contract_checks(), *extra):
        items = check.items
        if twin and check.twin == "":
            out.append(ContractFinding(check, "n/a"))
            continue
        if twin and check.twin != "same":
            path = ROOT / check.twin
            items = check.twin_items if check.twin_items is not None else check.items
        else:
            path = root / check.file
        if not path.is_file():  # a file that appeared after the contract's commit may be absent from a checkout
            out.append(ContractFinding(check, "n/a" if check.since else "missing", read=str(path)))
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        absent = tuple(i for i in items if not _present(check.kind, text, i))
        out.append(ContractFinding(check, "differs" if absent else "ok", absent, read=str(path)))
    return out


def looks_like_checkout(directory: str | Path) -> bool:
    """An mlir-air checkout (or a twin): it has programming_examples/ and the verify runner."""
    root = Path(directory)
    return is_twin(root) or ((root / "programming_examples").is_dir()
                             and (root / "programming_examples" / "llms" / "verify" / "verify_runner.py").is_file())


def usable_checkout(directory: str | None, extra: list[Check] | tuple = ()) -> str | None:
    """None when `directory` is an mlir-air checkout that meets the contract; else one line saying why not."""
    if not directory:
        return ("MLIR_AIR_DIR is not set: point it at an mlir-air checkout (or a `ledger twin` directory) "
                "before running the mlir-air executor")
    if not Path(directory).is_dir() or not looks_like_checkout(directory):
        return (f"MLIR_AIR_DIR={directory} is not an mlir-air checkout (no programming_examples/llms/verify/"
                "verify_runner.py)")
    failing = [f for f in check_checkout(directory, extra) if f.fails]
    if failing:
        files = sorted({f.check.file for f in failing})
        return (f"MLIR_AIR_DIR={directory} does not meet mlir-air contract v{CONTRACT_VERSION} "
                f"({len(failing)} difference(s) in {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}); "
                f"run `ledger doctor {directory}`")
    return None
