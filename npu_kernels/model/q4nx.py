"""The Q4NX codec: FastFlowLM's `model.q4nx` bundle as mlir-air's loaders read it, written from their format
description (our own code; nothing of theirs is copied).

A bundle is a safetensors container (8-byte little-endian header length, JSON header, data). Each decoder
projection is stored 4-bit in 32x256 blocks; norms and embeddings are bf16 tensors under their HF names. One
block is 5120 bytes (proj_qmm_pack.py:4-9@0d63308):

    bf16  scale[8 groups][32 rows]      bytes    0 ..  512
    bf16  min[8 groups][32 rows]        bytes  512 .. 1024
    uint8 qs[2 row groups][256 cols][8] bytes 1024 .. 5120, byte = (code of row 2k+1) << 4 | code of row 2k

so the code of block row `g*16 + 2k + b` (g < 2, k < 8, b the nibble) and block column c sits in nibble b of
qs[g][c][k] (the row de-interleave `row_in_block = g*16 + r*2 + b`, qwen3_0_6b_q4nx_weights.py:11@81d902e).
Blocks follow one another in (row block, column block) order. The two families differ
(`LAYOUTS`):

  llama  header shape the (padded) real [M, K] (the loader ignores the dtype; ours writes I16); dequantisation `w = scale * (q - min)`, the
         min field being a zero point (llama32_1b_q4nx_weights.py:56-64, `Q4nxModel.dequant`@5b5fc4a).
  qwen3  "I8 / GGUF-Q4_1-derived": header dtype I8, packed header shape (n_blocks, 5120); dequantisation
         `w = scale * q + min`, an additive min (qwen3_0_6b_q4nx_weights.py:6-16, 73-107@81d902e).

Precision of the reference dequantisation: scale and min are bf16, the code an integer 0..15; the product and
the sum are formed in float32 and rounded once to bf16 (round to nearest, ties to even), as both loaders do
(float32 numpy math, then `astype(bfloat16)` when the weights become bf16 GEMM inputs). A bf16 scale times a
4-bit code needs 12 significant bits, exact in float32; the add rounds at most once in float32.

The writer quantises per 32-column group of each row with min/max affine codes rounded to nearest (ties to
even): llama stores scale = (max-min)/15 and the zero point -min/scale, qwen3 scale = (max-min)/15 and min.
A matrix whose sides are not multiples of 32 rows / 256 columns is padded with zero rows/columns carrying zero
codes, zero scales and zero mins (SmolLM2-135M's 576-wide K becomes 768): the padding dequantises to exactly 0
and the reader crops it, refusing padding that is not all zero. The header metadata says what was padded.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

ROW_BLOCK = 32
COL_BLOCK = 256
GROUP = 32
PARALLEL = 16
N_GROUPS = COL_BLOCK // GROUP  # 8 scale groups per block row
BLOCK_BYTES = 2 * 2 * N_GROUPS * ROW_BLOCK + ROW_BLOCK * COL_BLOCK // 2  # 512 + 512 + 4096 = 5120
LAYOUTS = ("llama", "qwen3")
SCALE_DTYPE = "bfloat16"  # the only scale/min dtype of the format (proj_qmm_pack.py:5-6@0d63308)
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
_HEADER_DTYPE = {"llama": "I16", "qwen3": "I8"}
_BF16 = ml_dtypes.bfloat16


class Q4nxError(ValueError):
    """Raised when a bundle cannot be read as Q4NX, or disagrees with the model it is said to hold."""


def padded_shape(rows: int, cols: int) -> tuple[int, int]:
    """The stored shape of an (rows, cols) matrix: rows up to a multiple of 32, columns of 256."""
    return -(-rows // ROW_BLOCK) * ROW_BLOCK, -(-cols // COL_BLOCK) * COL_BLOCK


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 array holding x rounded to bf16 (nearest, ties to even)."""
    return np.asarray(x, np.float32).astype(_BF16).astype(np.float32)


# --- blocks ------------------------------------------------------------------------------------------------

def pack(codes: np.ndarray, scales: np.ndarray, mins: np.ndarray, scale_dtype: str = SCALE_DTYPE) -> bytes:
    """Blocks of a stored (M, K) matrix: codes uint8 (M, K) 0..15, scales/mins (M, K/32) (rounded to
    `scale_dtype`), in (row block, column block) order. M % 32 == 0 and K % 256 == 0."""
    m, k = codes.shape
    if m % ROW_BLOCK or k % COL_BLOCK:
        raise Q4nxError(f"a stored matrix is a whole number of 32x256 blocks, not {m}x{k}")
    p, q = m // ROW_BLOCK, k // COL_BLOCK
    dt = _BF16 if scale_dtype == SCALE_DTYPE else np.dtype(scale_dtype)

    def side(a):  # (M, K/32) -> (p, q, 8 groups, 32 rows) as 16-bit words
        a = np.asarray(a, np.float32).astype(dt).view(np.uint16)
        return a.reshape(p, ROW_BLOCK, q, N_GROUPS).transpose(0, 2, 3, 1).reshape(p, q, -1)

    c = np.asarray(codes, np.uint8).reshape(p, ROW_BLOCK, q, COL_BLOCK).transpose(0, 2, 1, 3)  # (p, q, 32, 256)
    c = c.reshape(p, q, 2, PARALLEL // 2, 2, COL_BLOCK)  # (p, q, g, k, b, col): row = g*16 + 2k + b
    qs = (c[:, :, :, :, 0, :] | (c[:, :, :, :, 1, :] << 4)).transpose(0, 1, 2, 4, 3)  # (p, q, g, col, k)
    blocks = np.concatenate([side(scales).view(np.uint8), side(mins).view(np.uint8),
                             qs.reshape(p, q, -1).astype(np.uint8)], axis=2)
    return blocks.tobytes()


def unpack(raw: bytes | np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes uint8 (M, K), scales float32 (M, K/32), mins float32 (M, K/32)) of a stored (M, K) matrix,
    scale and min read as bf16."""
    p, q = rows // ROW_BLOCK, cols // COL_BLOCK
    buf = np.frombuffer(raw, np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) else np.asarray(raw, np.uint8)
    if buf.size != p * q * BLOCK_BYTES or rows % ROW_BLOCK or cols % COL_BLOCK:
        raise Q4nxError(f"{buf.size} bytes are not the {rows}x{cols} matrix's {p * q} blocks of {BLOCK_BYTES}")
    b = buf.reshape(p, q, BLOCK_BYTES)

    def side(lo, hi):  # (p, q, 8, 32) bf16 -> (M, K/32)
        a = np.ascontiguousarray(b[:, :, lo:hi]).view(_BF16).astype(np.float32).reshape(p, q, N_GROUPS, ROW_BLOCK)
        return a.transpose(0, 3, 1, 2).reshape(rows, cols // GROUP)

    half = 2 * N_GROUPS * ROW_BLOCK
    qs = b[:, :, 2 * half:].reshape(p, q, 2, COL_BLOCK, PARALLEL // 2).transpose(0, 1, 2, 4, 3)  # (p,q,g,k,col)
    c = np.stack([qs & 0xF, qs >> 4], axis=4)  # (p, q, g, k, b, col)
    codes = c.reshape(p, q, ROW_BLOCK, COL_BLOCK).transpose(0, 2, 1, 3).reshape(rows, cols)
    return np.ascontiguousarray(codes), side(0, half), side(half, 2 * half)


def dequantise_fp32(codes: np.ndarray, scales: np.ndarray, mins: np.ndarray, layout: str) -> np.ndarray:
    """The weights of codes/scales/mins in float32, unrounded (the loaders' `dequant`, e.g.
    llama32_1b_q4nx_weights.py `dequant`@0d63308, before any cast to bf16)."""
    s = np.repeat(np.asarray(scales, np.float32), GROUP, axis=1)
    m = np.repeat(np.asarray(mins, np.float32), GROUP, axis=1)
    q = codes.astype(np.float32)
    if layout == "llama":
        return s * (q - m)
    if layout == "qwen3":
        return s * q + m
    raise Q4nxError(f"unknown Q4NX layout {layout!r} (known: {', '.join(LAYOUTS)})")


def dequantise(codes: np.ndarray, scales: np.ndarray, mins: np.ndarray, layout: str) -> np.ndarray:
    """The bf16 weights (float32 array of bf16 values) of codes/scales/mins: float32 math, one RNE to bf16."""
    return to_bf16(dequantise_fp32(codes, scales, mins, layout))


def quantise(w: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min/max affine 4-bit codes of a real (M, K) matrix, padded to whole blocks (zero codes, scales, mins).
    Returns (codes, scales, mins) with scales/mins already bf16 values."""
    if layout not in LAYOUTS:
        raise Q4nxError(f"unknown Q4NX layout {layout!r} (known: {', '.join(LAYOUTS)})")
    w = np.asarray(w, np.float32)
    rows, cols = w.shape
    mp, kp = padded_shape(rows, cols)
    g = w.reshape(rows, cols // GROUP, GROUP) if cols % GROUP == 0 else None
    if g is None:
        raise Q4nxError(f"a {rows}x{cols} matrix: K must be a multiple of the 32-column group")
    lo, hi = g.min(axis=2), g.max(axis=2)  # (M, K/32)
    scale = to_bf16((hi - lo) / 15.0)
    flat = scale == 0  # a constant group
    if layout == "qwen3":
        mn = to_bf16(lo)
        safe = np.where(flat, 1.0, scale)
        q = np.rint((g - mn[..., None]) / safe[..., None])
    else:
        # w = s * (q - z): a constant group c gets s = |c| and z = -sign(c) (q = 0 gives c), or 0 for c = 0
        scale = np.where(flat, to_bf16(np.abs(lo)), scale)
        safe = np.where(scale == 0, 1.0, scale)
        mn = to_bf16(np.where(flat, -np.sign(lo), -lo / safe))
        q = np.rint(g / safe[..., None] + mn[..., None])
    q = np.where(flat[..., None], 0, np.clip(q, 0, 15)).astype(np.uint8).reshape(rows, cols)
    codes = np.zeros((mp, kp), np.uint8)
    scales = np.zeros((mp, kp // GROUP), np.float32)
    mins = np.zeros((mp, kp // GROUP), np.float32)
    codes[:rows, :cols], scales[:rows, :cols // GROUP], mins[:rows, :cols // GROUP] = q, scale, mn
    return codes, scales, mins


# --- the container -----------------------------------------------------------------------------------------

def write_container(path: Path, tensors: dict[str, tuple[str, list[int], bytes]], metadata: dict[str, str]) -> str:
    """Write a safetensors container by hand (the Llama Q4NX header shape does not describe its bytes, so the
    safetensors library refuses it): name -> (dtype, shape, bytes), names sorted. Returns its sha256."""
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    offset = 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    blob = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for chunk in (struct.pack("<Q", len(blob)), blob, *(tensors[n][2] for n in sorted(tensors))):
            f.write(chunk)
            h.update(chunk)
    return h.hexdigest()


def named_bytes_sha256(named: dict[str, bytes]) -> str:
    """sha256 over (name, NUL, bytes) in name order: how QuantisedBundleRead digests a set of tensors."""
    h = hashlib.sha256()
    for name in sorted(named):
        h.update(name.encode() + b"\0" + named[name])
    return h.hexdigest()


def bf16_bytes(a: np.ndarray) -> bytes:
    return np.asarray(a, np.float32).astype(_BF16).tobytes()


@dataclass
class Bundle:
    """A `model.q4nx` read into memory: its header, metadata and the raw bytes of each tensor."""

    path: Path
    header: dict[str, dict[str, Any]]
    metadata: dict[str, str]
    data: bytes = field(repr=False)
    base: int = 0

    @property
    def names(self) -> list[str]:
        return sorted(self.header)

    def raw(self, name: str) -> memoryview:
        begin, end = self.header[name]["data_offsets"]
        return memoryview(self.data)[self.base + begin:self.base + end]

    def layout(self) -> str:
        """The family layout: the metadata's, else what the first projection's header says (I8 + (n, 5120):
        qwen3; otherwise llama). A metadata layout the headers contradict is refused."""
        proj = next((n for n in self.names if n.endswith("q_proj.weight")), None)
        seen = None
        if proj is not None:
            h = self.header[proj]
            seen = "qwen3" if h["dtype"] == "I8" and len(h["shape"]) == 2 and h["shape"][1] == BLOCK_BYTES else "llama"
        said = self.metadata.get("layout")
        if said is not None and said not in LAYOUTS:
            raise Q4nxError(f"{self.path.name}: metadata layout {said!r} is not one of {', '.join(LAYOUTS)}")
        if said and seen and said != seen:
            raise Q4nxError(f"{self.path.name}: metadata says layout {said}, but {proj} is stored as {seen}")
        return said or seen or "llama"

    def scale_dtype(self) -> str:
        return self.metadata.get("scale_dtype", SCALE_DTYPE)

    def bf16(self, name: str) -> np.ndarray:
        h = self.header.get(name)
        if h is None:
            raise Q4nxError(f"{self.path.name} has no tensor {name}")
        if h["dtype"] != "BF16":
            raise Q4nxError(f"{self.path.name}: {name} is {h['dtype']}, Q4NX stores norms and embeddings as BF16")
        return np.frombuffer(self.raw(name), _BF16).astype(np.float32).reshape(h["shape"])

    def projection(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """codes/scales/mins of the real (rows, cols) matrix `name`, padding checked to be zero and cropped."""
        h = self.header.get(name)
        if h is None:
            raise Q4nxError(f"{self.path.name} has no tensor {name}")
        if self.scale_dtype() != SCALE_DTYPE:
            raise Q4nxError(f"{self.path.name}: scales and mins are {self.scale_dtype()}; Q4NX stores them as "
                            f"{SCALE_DTYPE} (proj_qmm_pack.py:5-6@0d63308)")
        layout = self.layout()
        mp, kp = padded_shape(rows, cols)
        want = ([mp * kp // (ROW_BLOCK * COL_BLOCK), BLOCK_BYTES] if layout == "qwen3" else [mp, kp])
        # the Llama loader reads the bytes whatever the header's dtype says (`_raw_i16`@5b5fc4a): only its shape counts
        dtype_ok = layout == "llama" or h["dtype"] == _HEADER_DTYPE[layout]
        if not dtype_ok or list(h["shape"]) != want:
            raise Q4nxError(f"{self.path.name}: {name} is {h['dtype']} {list(h['shape'])}, the config's {rows}x{cols} "
                            f"needs {_HEADER_DTYPE[layout]} {want} in the {layout} layout")
        codes, scales, mins = unpack(self.raw(name), mp, kp)
        if not (np.isfinite(scales).all() and np.isfinite(mins).all()):
            raise Q4nxError(f"{self.path.name}: {name} has non-finite scales or mins")
        g = cols // GROUP
        if codes[rows:].any() or codes[:, cols:].any() or scales[rows:].any() or scales[:, g:].any() \
                or mins[rows:].any() or mins[:, g:].any():
            raise Q4nxError(f"{self.path.name}: {name}'s padding beyond {rows}x{cols} is not zero")
        return codes[:rows, :cols], scales[:rows, :g], mins[:rows, :g]


def read_bundle(path: str | Path) -> Bundle:
    """Read a `model.q4nx` (a file, or a folder holding one); the header must parse."""
    path = Path(path)
    path = path / "model.q4nx" if path.is_dir() else path
    try:
        data = path.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
    except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Q4nxError(f"{path} is not a readable Q4NX bundle ({e})") from e
    if not isinstance(header, dict):
        raise Q4nxError(f"{path} is not a readable Q4NX bundle (its header is not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    return Bundle(path=path, header=header, metadata=dict(metadata), data=data, base=8 + n)
