"""The harness table: which mlir-air command checks which (kernel, contract), and how a command is rendered.

The default table is `npu_kernels/mlir_air/harnesses.toml`; a user TOML (a path, or env `NPU_LEDGER_HARNESSES`)
is laid over it entry by entry. `render_command` fills a command's placeholders from MLIR_AIR_DIR, the entry's
defaults, the caller's shape and tile, and the entry's switches, shell-quoting every value.
"""

from __future__ import annotations

import json
import os
import shlex
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from npu_kernels.numerics.kernels import harnesses as kernel_harnesses
from npu_kernels.settings import env_get

DEFAULT_TABLE = Path(__file__).resolve().parent / "harnesses.toml"
ENV_TABLE = "NPU_LEDGER_HARNESSES"
ENV_MLIR_AIR = "MLIR_AIR_DIR"


class HarnessError(RuntimeError):
    """Base of the mlir-air executor's errors."""


class HarnessConfigError(HarnessError):
    """Raised when the harness table cannot produce a command: no entry for a (kernel, contract), a
    placeholder with no value, MLIR_AIR_DIR unset, or a malformed TOML table."""



@dataclass(frozen=True)
class HarnessSpec:
    key: str
    command: str
    contracts: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    switches: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # variable -> "--flag {}" (value flags into {switches})
    latency_flags: dict[str, str] = field(default_factory=dict)  # the same, into {latency_switches} only
    latency_command: str | None = None  # a second, timing-only run (its `profile` target, or --perf-iters)
    latency_format: str = "transcript"  # "transcript" (XRTRunner's Latency line) or "profile" (profile.py)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tile_keys: tuple[str, ...] = ()
    timeout_s: float | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class HarnessTable:
    harnesses: dict[str, HarnessSpec]
    model: dict[str, Any]
    timeout_s: float
    lock_timeout_s: float
    sources: tuple[str, ...]

    def lookup(self, kernel: str, contract: str | None) -> HarnessSpec:
        """The entry for (kernel, contract): `kernel@contract` first, then `kernel` if it lists the contract
        (or lists none, or no contract is asked for). Raises `HarnessConfigError` naming what exists."""
        if contract and f"{kernel}@{contract}" in self.harnesses:
            return self.harnesses[f"{kernel}@{contract}"]
        spec = self.harnesses.get(kernel)
        if spec is not None and (not contract or not spec.contracts or contract in spec.contracts):
            return spec
        known = ", ".join(sorted(self.harnesses)) or "none"
        wanted = f"{kernel}@{contract}" if contract else kernel
        raise HarnessConfigError(
            f"no mlir-air harness for {wanted!r} (entries: {known}); add [harness.{json.dumps(wanted)}] to a "
            f"harness TOML passed to MlirAirExecutor or named by ${ENV_TABLE}."
        )


def _merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for section in ("settings", "model"):
        if section in over:
            out[section] = {**out.get(section, {}), **over[section]}
    harness = {k: dict(v) for k, v in out.get("harness", {}).items()}
    for key, entry in over.get("harness", {}).items():
        merged = {**harness.get(key, {}), **entry}
        if "command" in entry and "latency_command" not in entry:  # the timing run belonged to the replaced command
            merged.pop("latency_command", None)
        for sub in ("defaults", "switches", "flags", "latency_flags", "aliases"):
            if sub in entry or sub in harness.get(key, {}):
                merged[sub] = {**harness.get(key, {}).get(sub, {}), **entry.get(sub, {})}
        harness[key] = merged
    out["harness"] = harness
    return out


def load_harness_table(path: str | os.PathLike | None = None) -> HarnessTable:
    """The default table overlaid by `path`, or else by the file named in env `NPU_LEDGER_HARNESSES`."""
    sources = [str(DEFAULT_TABLE)]
    data = default_table_data()
    user = path if path is not None else env_get(ENV_TABLE) or None
    if user is not None:
        data = _merge_tables(data, _read_toml(Path(user)))
        sources.append(str(user))
    harnesses: dict[str, HarnessSpec] = {}
    for key, entry in data.get("harness", {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"].strip():
            raise HarnessConfigError(f"harness entry {key!r} needs a non-empty `command` string.")
        harnesses[key] = HarnessSpec(
            key=key,
            command=entry["command"],
            contracts=tuple(entry.get("contracts", ())),
            defaults=dict(entry.get("defaults", {})),
            switches={k: str(v) for k, v in entry.get("switches", {}).items()},
            flags={k: str(v) for k, v in entry.get("flags", {}).items()},
            latency_flags={k: str(v) for k, v in entry.get("latency_flags", {}).items()},
            latency_command=entry.get("latency_command"),
            latency_format=_latency_format(key, entry.get("latency_format", "transcript")),
            aliases={k: tuple(v) for k, v in entry.get("aliases", {}).items()},
            tile_keys=tuple(entry.get("tile_keys", ())),
            timeout_s=entry.get("timeout_s"),
            cwd=entry.get("cwd"),
        )
    settings = data.get("settings", {})
    return HarnessTable(
        harnesses=harnesses,
        model=dict(data.get("model", {})),
        timeout_s=float(settings.get("timeout_s", 3600)),
        lock_timeout_s=float(settings.get("lock_timeout_s", 1800)),
        sources=tuple(sources),
    )


def _latency_format(key: str, value: Any) -> str:
    if value not in ("transcript", "profile"):
        raise HarnessConfigError(f"harness entry {key!r}: latency_format must be 'transcript' or 'profile', not {value!r}.")
    return str(value)


def default_table_data() -> dict[str, Any]:
    """harnesses.toml, and the harness entries each kernel module of npu_kernels.numerics.kernels declares (`harness`,
    harnesses.toml's keys as a dict, or one per table key; an entry of the file itself wins)."""
    data = _read_toml(DEFAULT_TABLE)
    harness = data.setdefault("harness", {})
    for key, entry in kernel_harnesses().items():  # a kernel mlir-air has no harness for declares it `Absent`
        harness.setdefault(key, json.loads(json.dumps(entry)))  # a copy: the table is the caller's
    return data


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise HarnessConfigError(f"cannot read harness table {path}: {e.strerror or e}.") from e
    except tomllib.TOMLDecodeError as e:
        raise HarnessConfigError(f"harness table {path} is not valid TOML: {e}.") from e


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(render_value(v) for v in value)
    return str(value)


def make_value(value: Any) -> str:
    """`value` as the right-hand side of a make variable on make's command line: every `$` doubled, so make
    expands it to the `$` it was (a model folder named `$(shell touch x)` reaches the recipe as that text, and
    no make function runs); shell quoting is the caller's."""
    return render_value(value).replace("$", "$$")


def render_command(
    template: str, variables: dict[str, Any], aliases: dict[str, tuple[str, ...]] | None = None, *, quote: bool = True
) -> str:
    """Fill `{name}` placeholders case-insensitively from `variables` (trying `aliases` in order), each
    value shell-quoted unless `quote=False`, and, where a `make` command assigns it to a variable (`M={M}`),
    `$`-escaped for make (`make_value`). A placeholder with no value raises `HarnessConfigError` listing the
    known names."""
    is_make = template.lstrip().startswith("make ")
    lowered = {str(k).lower(): v for k, v in variables.items()}
    alias_map = {k.lower(): [a.lower() for a in v] for k, v in (aliases or {}).items()}
    out: list[str] = []
    for literal, name, spec, conv in string.Formatter().parse(template):
        out.append(literal)
        if name is None:
            continue
        if spec or conv:
            raise HarnessConfigError(f"placeholder {{{name}}} in {template!r} may not carry a format spec.")
        for candidate in [name.lower(), *alias_map.get(name.lower(), [])]:
            if candidate in lowered:
                assigned = is_make and literal.endswith("=")  # `NAME={value}` on a make call
                value = make_value(lowered[candidate]) if assigned else render_value(lowered[candidate])
                out.append(shlex.quote(value) if quote else value)
                break
        else:
            known = ", ".join(sorted(lowered)) or "none"
            raise HarnessConfigError(f"no value for placeholder {{{name}}} in {template!r} (known: {known}).")
    return "".join(out)
