"""A model as a Q4NX bundle and back (`npu_kernels.model.q4nx` is the block codec).

`write_bundle` quantises a bf16 HF folder's seven projections per layer (`ledger quantize`); norms, embeddings
and an untied LM head stay bf16 (every mlir-air 4-bit deployment ties its head to `embed_tokens` and ignores
the bundle's quantised `lm_head`: llama32_1b_q4nx_weights.py `embed_norm_lmhead`@5b5fc4a,
qwen3_0_6b_q4nx_weights.py `load_q4nx_weights`@81d902e; no untied one exists to follow, so ours is kept bf16).

`dequantised_tensors` reads a bundle against a config into HF-named bf16 tensors (`w = scale*q + min` or
`scale*(q - min)`, per layout) - the dequantised model. `bundle_problem` is init's one-line check.
`write_reference_folder` writes the dequantised model as an HF folder (base config + tokenizer, one
model.safetensors, the bundle beside it) so transformers loads the dequantised reference from local files.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.q4nx import (
    LAYOUTS,
    PROJECTIONS,
    SCALE_DTYPE,
    Bundle,
    Q4nxError,
    bf16_bytes,
    dequantise,
    named_bytes_sha256,
    pack,
    padded_shape,
    quantise,
    read_bundle,
    write_container,
)
from npu_kernels.model.q4nx_device import DECODE_FILE, decode_tensors, decode_weights
from npu_kernels.model.features.fused_projections import fuse, split_fused, unfused_tensors
from npu_kernels.model.weights import ModelWeights, read_checkpoint, weights_from

BUNDLE_FILE = "model.q4nx"
REFERENCE_FILE = "model.safetensors"
_WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".gguf", ".q4nx", ".requant")
_WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def is_projection(name: str) -> bool:
    """A Llama-named projection (the names `PROJECTIONS` lists); a bundle's own set is `projection_names(config)`."""
    return ".layers." in name and any(name.endswith(f"{p}.weight") for p in PROJECTIONS)


# The linear layers of a block by the description's roles (npu_kernels.model.description), whatever the family
# names them: attention q/k/v/o, the GLU's gate/up/down, a hybrid's short-convolution in/out projections. What
# mlir-air quantises for LFM2 (lfm2_1_2b_q4nx/lfm2_1_2b_q4nx_weights.py :44-52 and `_Q4_SUFFIXES` :89-99 at 0c380f09:
# feed_forward.w1/w2/w3, self_attn.q/k/v/out_proj, conv.in_proj/out_proj); norms, biases, the depthwise taps,
# the embedding and the LM head stay bf16 there and here.
PROJECTION_FIELDS = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down", "conv_in", "conv_out")


def projection_names(config: ModelConfig) -> list[str]:
    """Every projection of every layer, under the names a bundle stores (`unfused_tensors`: a fused qkv / gate_up
    split into its parts, which Phi-3's description names as Llama's), in block order."""
    prefix, names = config.arch.prefix, []
    for i in range(config.n_layers):
        names += [f"{prefix}layers.{i}.{suffix}" for field, suffix in config.arch.layer_tensors(i)
                  if field in PROJECTION_FIELDS]
    return names


def hf_tensors(folder: str | Path, config: ModelConfig) -> dict[str, np.ndarray]:
    """Every tensor the config requires, (out, in) shapes, as float32 arrays of bf16 values, under the names a
    bundle stores: the checkpoint's, fused tensors split into their parts
    (npu_kernels.model.features.fused_projections.unfused_tensors), norm weights as stored (a `1+w` family's w:
    the loader folds them)."""
    return split_fused(read_checkpoint(folder, config), config)


def write_bundle(folder: str | Path, out: str | Path, config: ModelConfig, layout: str = "llama") -> dict[str, Any]:
    """Quantise the HF folder into `out` (a file path); returns what was written (sha256, padded tensors)."""
    if layout not in LAYOUTS:
        raise Q4nxError(f"unknown Q4NX layout {layout!r} (known: {', '.join(LAYOUTS)})")
    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    padded: dict[str, list[int]] = {}
    projections = set(projection_names(config))
    source = hf_tensors(folder, config)
    missing = sorted(projections - set(source))
    if missing:  # a family whose description names a projection the bundle's names do not: refused, not skipped
        raise Q4nxError(f"cannot quantise {len(missing)} of {len(projections)} projections: {', '.join(missing[:3])}"
                        f"{' ...' if len(missing) > 3 else ''} are not among the tensors a bundle stores")
    for name, a in source.items():
        if name not in projections:
            tensors[name] = ("BF16", list(a.shape), bf16_bytes(a))
            continue
        codes, scales, mins = quantise(a, layout)
        stored = list(codes.shape)
        if stored != list(a.shape):
            padded[name] = [list(a.shape), stored]
        shape = [codes.size // (32 * 256), 5120] if layout == "qwen3" else stored
        tensors[name] = ("I8" if layout == "qwen3" else "I16", shape, pack(codes, scales, mins))
    pads = sorted({f"{r[0]}x{r[1]}->{s[0]}x{s[1]}" for r, s in padded.values()})
    metadata = {"format": "q4nx", "layout": layout, "scale_dtype": SCALE_DTYPE, "group_size": "32",
                "block": "32x256", "writer": "npu-ledger", "padding": ", ".join(pads) or "none"}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sha = write_container(out, tensors, metadata)
    quantised = sum(1 for name in tensors if name in projections)
    return {"path": str(out), "sha256": sha, "layout": layout, "n_projections": quantised,
            "n_projections_total": len(projections), "n_bf16": len(tensors) - quantised,
            "padded": pads, "bytes": out.stat().st_size}


def dequantised_tensors(bundle: Bundle, config: ModelConfig, dequant=dequantise) -> dict[str, np.ndarray]:
    """The dequantised model: every tensor the config requires, HF names as the family's checkpoints store them
    (fused parts concatenated again), float32 arrays of bf16 values. `dequant(codes, scales, mins, layout)` is the
    codec's unless a test fault wraps it."""
    layout = bundle.layout()
    out = {}
    projections = set(projection_names(config))
    for name, shape in unfused_tensors(config).items():
        if name in projections:
            if bundle.header.get(name, {}).get("dtype") == "BF16":  # a bundle that left a projection unquantised
                raise Q4nxError(f"{bundle.path.name}: {name} is stored BF16, not 4-bit: a Q4NX bundle quantises "
                                f"every projection (re-write it with `ledger quantize`)")
            out[name] = dequant(*bundle.projection(name, *shape), layout)
            continue
        a = bundle.bf16(name)
        if tuple(a.shape) != tuple(shape):
            raise Q4nxError(f"{bundle.path.name}: {name} has shape {list(a.shape)}, the config needs {list(shape)}")
        out[name] = a
    return fuse(out, config)


def bundle_problem(path: str | Path, config: ModelConfig) -> str | None:
    """Why the bundle cannot be deployed with this config (one line), or None: every tensor the config needs,
    its shape, dtype and padding, the scale dtype, finite scales."""
    try:
        dequantised_tensors(read_bundle(path), config)
    except Q4nxError as e:
        return str(e)
    return None


def reference_bytes(tensors: dict[str, np.ndarray]) -> dict[str, tuple[str, list[int], bytes]]:
    return {name: ("BF16", list(a.shape), bf16_bytes(a)) for name, a in tensors.items()}


def container_sha256(tensors: dict[str, tuple[str, list[int], bytes]]) -> str:
    """The digest QuantisedBundleRead records of a container's tensors: names and bytes, in name order."""
    return named_bytes_sha256({name: t[2] for name, t in tensors.items()})


def reference_sha256(bundle_path: str | Path, config: ModelConfig) -> str:
    """sha256 of the model.safetensors `write_reference_folder` writes from this bundle (re-derived, not read)."""
    return container_sha256(reference_bytes(dequantised_tensors(read_bundle(bundle_path), config)))


def decode_reference_sha256(bundle_path: str | Path, config: ModelConfig) -> str:
    """sha256 of the decode.requant a device-style reference folder holds, re-derived from the bundle."""
    return container_sha256(reference_bytes(decode_tensors(decode_weights(bundle_path, config), config)))


def write_reference_folder(bundle_path: str | Path, base: str | Path, out: str | Path,
                           config: ModelConfig, style: str = "host") -> dict[str, Any]:
    """The dequantised model as an HF folder: the base folder's config and tokenizer files, the bundle as
    model.q4nx, the dequantised weights as one bf16 model.safetensors; for the device style also the decode's
    re-quantised weights as decode.requant (npu_kernels.model.q4nx_device). Returns the digests written."""
    base, out = Path(base), Path(out)
    bundle = read_bundle(bundle_path)
    tensors = reference_bytes(dequantised_tensors(bundle, config))
    out.mkdir(parents=True, exist_ok=True)
    for p in sorted(base.iterdir()):
        if p.is_file() and p.suffix not in _WEIGHT_FILES and p.name not in _WEIGHT_INDEXES:
            shutil.copyfile(p, out / p.name)
    shutil.copyfile(bundle.path, out / BUNDLE_FILE)
    write_container(out / REFERENCE_FILE, tensors, {"format": "pt", "dequantised_from": BUNDLE_FILE})
    decode_sha = ""
    if style == "device":
        dec = reference_bytes(decode_tensors(decode_weights(out / BUNDLE_FILE, config), config))
        write_container(out / DECODE_FILE, dec, {"format": "pt", "requantised_from": BUNDLE_FILE})
        decode_sha = container_sha256(dec)
    pads = bundle.metadata.get("padding", "")
    return {"layout": bundle.layout(), "dequantised_sha256": container_sha256(tensors), "style": style,
            "decode_sha256": decode_sha,
            "padded": [p for p in pads.split(", ") if p and p != "none"], "scale_dtype": bundle.scale_dtype(),
            "stored_shapes": {n: bundle.header[n]["shape"] for n in projection_names(config) if n in bundle.header}}


def padding_of(config: ModelConfig) -> list[str]:
    """The projections' padding, from the config (what the reader crops): 'RxC->R'xC'' per distinct shape."""
    out = set()
    projections = set(projection_names(config))
    for name, shape in unfused_tensors(config).items():
        if name in projections and padded_shape(*shape) != tuple(shape):
            out.add(f"{shape[0]}x{shape[1]}->{padded_shape(*shape)[0]}x{padded_shape(*shape)[1]}")
    return sorted(out)


def host_dequantised_weights(folder: str | Path, config: ModelConfig, dequant=dequantise) -> ModelWeights:
    """The pipeline's weights of a 4-bit deployment: its folder's model.q4nx dequantised on the host at load (the
    qwen3_0_6b_q4nx style: bf16 pipeline, same Phase 1 rows), read through `dequant` (a test fault may wrap it)."""
    tensors = dequantised_tensors(read_bundle(Path(folder) / BUNDLE_FILE), config, dequant)
    return weights_from(tensors.__getitem__, folder, config)


def is_quantised_folder(folder: str | Path) -> bool:
    return (Path(folder) / BUNDLE_FILE).is_file()
