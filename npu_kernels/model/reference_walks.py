"""A runner's walk recorded and replayed, and recorded walks of npu-ledger's HF bf16 reference kept by content.

`record(runner, prompt, n, feed)` walks a runner over `n` next-token distributions (prefill, then decode fed
`feed`, or its own greedy token, the smaller id on a tie, as `compare.token_gate` forces the reference's);
`Replay` hands a recording back through the Runner protocol and refuses any input other than the recorded one.

`reference_walks(folder, prompts, n, build)` records the greedy walks of npu-ledger's own HF reference
(`npu_kernels.model.hf_reference.HfRunner` of `folder`), building it only if a walk must be computed. With
`NPU_LEDGER_REFERENCE_CACHE=DIR` set, each walk is kept under DIR by the sha256 of everything it is a function
of: every file of the model folder (path and bytes), the torch and transformers versions, the CPU's machine
type and feature flags (a reduction may take another path on another ISA), the prompt ids and the step count.
A Phase 4-5 switch re-runs `make verify` and `make verify-walk` against the same reference eight times or more;
the switch changes the NPU side only, so the reference's walks are recomputed for nothing. `reference_prefill`
keeps a diagnosis's prefill (every layer's output) the same way. Unset (the default),
every walk is computed. The evaluator never reads this store: Phase 7 re-runs its reference itself (in-process).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from npu_kernels.model.compare import topk_ids
from npu_kernels.model.runner import DecodeStepRecord, PrefillRecord
from npu_kernels.settings import env_get

CACHE_ENV = "NPU_LEDGER_REFERENCE_CACHE"
REFERENCE = "npu-ledger npu_kernels.model.hf_reference.HfRunner bf16"


class ReplayMismatch(RuntimeError):
    """A replayed runner was asked for an input it did not record."""


class Recorded:
    """One side's walk, recorded: the prompt, the tokens it was fed, the logits of every step."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.prompt: list[int] = [int(t) for t in prompt]
        self.fed: list[int] = []
        self.logits: list[np.ndarray] = []


def record(runner, prompt: Sequence[int], n_steps: int, feed: Sequence[int] | None) -> Recorded:
    """Walk `runner` over `n_steps` logits: prefill, then decode fed `feed` (None: its own greedy token)."""
    rec = Recorded(prompt)
    rec.logits.append(np.asarray(runner.prefill(np.asarray(rec.prompt, np.int64)).logits_at_pred, np.float32).copy())
    for step in range(1, n_steps):
        token = int(feed[step - 1]) if feed is not None else topk_ids(rec.logits[-1], 1)[0]
        rec.fed.append(token)
        out = runner.decode_step(token, len(rec.prompt) + step - 1)
        rec.logits.append(np.asarray(out.lm_head_logits, np.float32).copy())
    return rec


class Replay:
    """A recorded walk as a Runner: the recorded logits for exactly the recorded inputs."""

    def __init__(self, name: str, rec: Recorded) -> None:
        self.name, self.rec, self.i = name, rec, 0

    def prefill(self, prompt_tokens) -> PrefillRecord:
        if [int(t) for t in prompt_tokens] != self.rec.prompt:
            raise ReplayMismatch(f"{self.name}: replayed on another prompt")
        self.i = 0
        z = self.rec.logits[0]
        return PrefillRecord([], np.empty(0, np.float32), z, topk_ids(z, 1)[0])

    def decode_step(self, input_token: int, current_pos: int) -> DecodeStepRecord:
        self.i += 1
        if self.i >= len(self.rec.logits) or int(input_token) != self.rec.fed[self.i - 1] \
                or int(current_pos) != len(self.rec.prompt) + self.i - 1:
            raise ReplayMismatch(f"{self.name}: step {self.i} fed token {input_token} at {current_pos}, "
                                 "not what was recorded")
        z = self.rec.logits[self.i]
        return DecodeStepRecord(z, topk_ids(z, 1)[0])


# --- npu-ledger's reference, kept by content ---------------------------------------------------------------

def folder_sha256(folder: str | Path) -> str:
    """sha256 over every file of a model folder (relative path and bytes; hidden entries skipped)."""
    root = Path(folder)
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(root).parts)):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return hashlib.sha256(" ".join(sorted(line.split(":", 1)[1].split())).encode()).hexdigest()[:16]
    except OSError:
        pass
    return platform.processor() or "unknown"


def reference_identity(folder: str | Path) -> dict[str, str]:
    """What npu-ledger's reference walk of `folder` is a function of, besides the prompt and the step count."""
    return {"reference": REFERENCE, "folder_sha256": folder_sha256(folder), "torch": _version("torch"),
            "transformers": _version("transformers"), "machine": platform.machine(), "cpu_flags": _cpu_flags()}


def walk_key(identity: dict[str, str], prompt: Sequence[int], n_steps: int) -> str:
    text = json.dumps({**identity, "prompt": [int(t) for t in prompt], "n_steps": int(n_steps)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _store_dir(cache_dir: str | Path | None) -> str | Path | None:
    """The store to use: `cache_dir` when given, else $NPU_LEDGER_REFERENCE_CACHE, else none."""
    return cache_dir if cache_dir is not None else env_get(CACHE_ENV) or None


def _load(path: Path, prompt: Sequence[int], n_steps: int) -> Recorded | None:
    try:
        with np.load(path) as z:
            logits, fed, kept = z["logits"], z["fed"], z["prompt"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # absent, or a torn / foreign file: recompute it
    if [int(t) for t in kept] != [int(t) for t in prompt] or len(logits) != n_steps or len(fed) != n_steps - 1:
        return None
    rec = Recorded(prompt)
    rec.fed = [int(t) for t in fed]
    rec.logits = [np.asarray(row, np.float32) for row in logits]
    return rec


def _store_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Written whole or not at all (a temporary file renamed over), so concurrent writers of one key are safe."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".walk-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _store(path: Path, rec: Recorded) -> None:
    _store_arrays(path, prompt=np.asarray(rec.prompt, np.int64), fed=np.asarray(rec.fed, np.int64),
                  logits=np.stack(rec.logits).astype(np.float32))


def reference_walks(folder: str | Path, prompts: Sequence[Sequence[int]], n_steps: int, build: Callable[[], object],
                    cache_dir: str | Path | None = None,
                    say: Callable[[str], None] = lambda line: None) -> list[Recorded]:
    """The reference's greedy walk of every prompt: from the store (`cache_dir`, else $NPU_LEDGER_REFERENCE_CACHE)
    where it holds one for exactly this folder, toolchain, CPU, prompt and step count; else recorded on
    `build()` (called at most once) and kept there."""
    where = _store_dir(cache_dir)
    identity = reference_identity(folder) if where else None
    runner = None
    out = []
    for i, prompt in enumerate(prompts):
        path = Path(where) / f"{walk_key(identity, prompt, n_steps)}.npz" if where else None
        rec = _load(path, prompt, n_steps) if path is not None else None
        if rec is not None:
            say(f"prompt {i + 1}/{len(prompts)}: reference walk read from the reference store ({path.name[:12]})")
        else:
            say(f"prompt {i + 1}/{len(prompts)}: reference greedy walk ({n_steps} steps)...")
            runner = runner if runner is not None else build()
            rec = record(runner, prompt, n_steps, None)
            if path is not None:
                _store(path, rec)
        out.append(rec)
    return out


def reference_prefill(folder: str | Path, prompt: Sequence[int], build: Callable[[], object],
                      cache_dir: str | Path | None = None, say: Callable[[str], None] = lambda line: None) -> PrefillRecord:
    """The reference's prefill of `prompt` with every layer's `ffn_out` and the final-norm output (what a
    diagnosis compares), from the store where it holds one for exactly this folder, toolchain, CPU and prompt;
    else computed on `build()` and kept there."""
    where = _store_dir(cache_dir)
    path = Path(where) / f"{walk_key({**reference_identity(folder), 'what': 'prefill'}, prompt, 0)}.npz" \
        if where else None
    if path is not None:
        try:
            with np.load(path) as z:
                kept, layers = z["prompt"], int(z["n_layers"])
                if [int(t) for t in kept] == [int(t) for t in prompt]:
                    say(f"reference prefill read from the reference store ({path.name[:12]})")
                    logits = np.asarray(z["logits"], np.float32)
                    return PrefillRecord([{"ffn_out": np.asarray(z[f"ffn_out_{i}"])} for i in range(layers)],
                                         np.asarray(z["final_hidden_normed"]), logits, topk_ids(logits, 1)[0])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # absent, or a torn / foreign file: recompute it
    rec = build().prefill(np.asarray(prompt, np.int64))
    if path is not None:
        arrays = {f"ffn_out_{i}": np.asarray(layer["ffn_out"]) for i, layer in enumerate(rec.layer_intermediates)}
        _store_arrays(path, prompt=np.asarray(prompt, np.int64), n_layers=np.asarray(len(rec.layer_intermediates)),
                      final_hidden_normed=np.asarray(rec.final_hidden_normed),
                      logits=np.asarray(rec.logits_at_pred, np.float32), **arrays)
    return rec
