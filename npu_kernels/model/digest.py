"""The model digest: what a deployment's evidence was measured against.

`model_digest(folder)` hashes config.json and every weight file (a device-style 4-bit reference's decode.requant too) (sha256 of the bytes) and resolves the
config fields that affect numerics (the `ModelConfig` fields plus RoPE scaling, the activation and the
stored dtype). Its `digest` is one sha256 over all of that, so any changed byte of config.json or of a
weight file, or any changed numerics field, changes it. Phase 0 records it (`ModelDigested`); every later
evidence event carries the `digest` it was measured against.

`invalidated_phases(changed)` says which phases' evidence a change invalidates: a changed config.json
invalidates every phase (it decides the kernel plan's shapes); a changed weight file every phase but
Phase 1, whose kernel rows run on synthetic inputs of the planned shapes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npu_kernels.model.architecture import load_raw_config, resolve, rope_scaling
from npu_kernels.model.description import beyond_legacy

CONFIG_FILE = "config.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".q4nx", ".requant")  # .requant: npu_kernels.model.q4nx_device
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
_CHUNK = 1 << 22  # 4 MiB reads


@dataclass(frozen=True)
class ModelDigest:
    """Field names match the `ModelDigested` event."""

    digest: str
    files: dict[str, str] = field(default_factory=dict)  # name relative to the folder -> sha256
    numerics: dict[str, Any] = field(default_factory=dict)

    def event_fields(self) -> dict[str, Any]:
        return {"digest": self.digest, "files": dict(self.files), "numerics": dict(self.numerics)}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def digest_files(folder: Path) -> list[Path]:
    """config.json and every weight file of a model folder, sorted by name."""
    found = [p for p in folder.iterdir() if p.is_file() and (
        p.name == CONFIG_FILE or p.name in WEIGHT_INDEXES or p.suffix in WEIGHT_SUFFIXES)]
    return sorted(found, key=lambda p: p.name)


def numerics_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The resolved config fields that change what a model computes."""
    config = resolve(raw)
    out = config.to_dict()
    del out["description"]  # an existing family's digest stays what it was: only what the Llama form lacks is added
    extra = beyond_legacy(config.arch, config)
    if extra:
        out["description_beyond_llama"] = extra
    out["rope_scaling"] = rope_scaling(raw)
    out["hidden_act"] = raw.get("hidden_act") or raw.get("hidden_activation") or "silu"
    out["torch_dtype"] = str(raw.get("torch_dtype") or raw.get("dtype") or "")
    return out


def model_digest(folder: str | Path) -> ModelDigest:
    """Hash a model folder (or the folder of a config.json path); see the module docstring."""
    folder = Path(folder)
    folder = folder if folder.is_dir() else folder.parent
    files = {p.name: file_sha256(p) for p in digest_files(folder)}
    numerics = numerics_fields(load_raw_config(folder))
    blob = json.dumps({"files": files, "numerics": numerics}, sort_keys=True, separators=(",", ":"), default=str)
    return ModelDigest(hashlib.sha256(blob.encode()).hexdigest(), files, numerics)


def changed_files(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """Names whose hash differs, that appeared or that disappeared, sorted (config.json first)."""
    names = {n for n in set(recorded) | set(now) if recorded.get(n) != now.get(n)}
    return sorted(names, key=lambda n: (n != CONFIG_FILE, n))


def changed_numerics(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))


def invalidated_phases(changed: list[str], passed: list[int]) -> list[int]:
    """The passed phases whose evidence a change of these files invalidates."""
    if not changed:
        return []
    if CONFIG_FILE in changed:
        return sorted(passed)
    return sorted(p for p in passed if p != 1)
