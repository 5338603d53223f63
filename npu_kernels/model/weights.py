"""Weights of an in-scope model from a local HF folder's safetensors files.

`check_weights` reads the safetensors headers only (no tensor data) and says which of the tensors the
config requires are missing or mis-shaped, in block order, so the first problem is named first. `read_header`
bounds the header length before reading it (`init` checks every file's header with `header_problem`).
`load_weights` reads them with tied or untied embeddings: each projection, the embedding and the LM head as bf16
bits (uint16, `npu_kernels.numerics.bf16.held_bf16`'s form: 2 B a value; a value that is no bf16, possible only
in a host-dequantised 4-bit bundle, keeps its array float32), the norms and other small tensors as float32 arrays
holding bf16 values. Each projection is held once (issue 48 item 3), in the layout the decode GEMV streams: HF's
(out, in) rows, C-contiguous (`ModelWeights.derived[("rows", layer, name)]`), the parts of a fused step
(`FUSED_ROWS`: Q/K/V, gate/up) row blocks of one array; the `LayerWeights` field is the executor layout
(`y = x @ W`, (in, out)) as a transposed view of those rows. Every executor widens the bits exactly
(`widened`) and makes a GEMM's operand C-contiguous for BLAS (`NpuPipeline._gemm_w`), so the sums run in the
order they did on float32 copies: no number moves. A Llama-3.2-1B held a float32 (in, out) copy, its fused
concatenation and the GEMV rows of both: 8-16 B per parameter beside the executor's operand; then 4 (float32 rows);
now 2.
"""

from __future__ import annotations

import json
import stat
import struct
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from npu_kernels.numerics.bf16 import held_bf16, widened
from npu_kernels.model.architecture import load_raw_config, rope_scaling
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.description import LLAMA_TENSORS
from npu_kernels.model.features import qk_norm, short_conv


class WeightsError(ValueError):
    """Raised when a model folder lacks a tensor the config requires, or its checkpoint cannot be read."""


@dataclass(frozen=True)
class WeightsReport:
    """Field names match the `WeightsChecked` event."""

    ok: bool
    n_tensors: int
    expected: int
    missing: list[str] = field(default_factory=list)
    misshaped: list[str] = field(default_factory=list)

    def event_fields(self) -> dict[str, Any]:
        return asdict(self)

    def first_problem(self) -> str | None:
        if self.missing:
            return f"tensor {self.missing[0]} is missing"
        if self.misshaped:
            return f"tensor {self.misshaped[0]}"
        return None


@dataclass
class LayerWeights:
    """One decoder block, executor layout: projections are (in, out) so that `y = x @ W`."""

    attn_norm: np.ndarray  # (E,)
    wq: np.ndarray | None  # (E, H*D); None on a short-convolution layer (LFM2), as wk, wv, wo
    wk: np.ndarray | None  # (E, Hkv*D)
    wv: np.ndarray | None  # (E, Hkv*D)
    wo: np.ndarray | None  # (H*D, E)
    ffn_norm: np.ndarray  # (E,)
    w_gate: np.ndarray  # (E, F)
    w_up: np.ndarray  # (E, F)
    w_down: np.ndarray  # (F, E)
    bq: np.ndarray | None = None  # (H*D,) Qwen2
    bk: np.ndarray | None = None  # (Hkv*D,)
    bv: np.ndarray | None = None  # (Hkv*D,)
    q_norm: np.ndarray | None = None  # (D,) Qwen3, Gemma3
    k_norm: np.ndarray | None = None  # (D,)
    post_attn_norm: np.ndarray | None = None  # (E,) Gemma3's sandwich: on the O output, before the residual add
    post_ffn_norm: np.ndarray | None = None  # (E,) on the down output
    conv_in: np.ndarray | None = None  # (E, 3E) LFM2's in_proj, columns B | C | x
    conv_w: np.ndarray | None = None  # (k, E) the depthwise taps, tap-major, oldest first (HF stores (E, 1, k))
    conv_out: np.ndarray | None = None  # (E, E) out_proj


@dataclass
class ModelWeights:
    config: ModelConfig
    embed: np.ndarray  # (V, E), host gather
    final_norm: np.ndarray  # (E,)
    lm_head: np.ndarray  # (V, E); the same array as `embed` when tied
    layers: list[LayerWeights]
    rope_scaling: dict[str, Any] | None = None
    key: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # prefix for executors' static_key
    derived: dict[tuple, np.ndarray] = field(default_factory=dict, repr=False)

    def derive(self, key: tuple, build) -> np.ndarray:
        """An array derived from these weights (a fused concatenation, a row-major copy for GEMV), built
        once and shared by every pipeline over these weights."""
        if key not in self.derived:
            self.derived[key] = build()
        return self.derived[key]


# LayerWeights field -> (HF shape as a function of the config, transposed at load); the HF names are the
# family's (ModelConfig.arch.tensors, npu_kernels.model.families)
_SHAPES = {
    "attn_norm": (lambda c: (c.emb_dim,), False),
    "wq": (lambda c: (c.n_heads * c.head_dim, c.emb_dim), True),
    "wk": (lambda c: (c.n_kv_heads * c.head_dim, c.emb_dim), True),
    "wv": (lambda c: (c.n_kv_heads * c.head_dim, c.emb_dim), True),
    "bq": (lambda c: (c.n_heads * c.head_dim,), False),
    "bk": (lambda c: (c.n_kv_heads * c.head_dim,), False),
    "bv": (lambda c: (c.n_kv_heads * c.head_dim,), False),
    **qk_norm.SHAPES,
    "wo": (lambda c: (c.emb_dim, c.n_heads * c.head_dim), True),
    "ffn_norm": (lambda c: (c.emb_dim,), False),
    "post_attn_norm": (lambda c: (c.emb_dim,), False),
    "post_ffn_norm": (lambda c: (c.emb_dim,), False),
    "w_gate": (lambda c: (c.hidden_dim, c.emb_dim), True),
    "w_up": (lambda c: (c.hidden_dim, c.emb_dim), True),
    "w_down": (lambda c: (c.emb_dim, c.hidden_dim), True),
    **short_conv.SHAPES,
}
NORM_FIELDS = ("attn_norm", "ffn_norm", "post_attn_norm", "post_ffn_norm", "q_norm", "k_norm")
# the projections held once, as the (out, in) rows a GEMV streams (the module docstring)
HELD_AS_ROWS = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down", "conv_in", "conv_out")
# a fused step's weight (the pipeline's `fusion` switch): its parts' rows, in this order, one array
FUSED_ROWS = {"wqkv": ("wq", "wk", "wv"), "w_gate_up": ("w_gate", "w_up")}


def hf_rows(config: ModelConfig, name: str) -> int:
    """The rows of LayerWeights field `name` as the checkpoint stores it (a fused tensor's part: its row block)."""
    return _SHAPES[name][0](config)[0]


def _layer_tensors(config: ModelConfig, layer: int):
    """(HF suffix, HF shape, [(field, rows, transpose)]) per tensor of `layer`, in block order: one field per
    tensor, or the fields a fused tensor splits into, row block after row block in the family's order."""
    arch = config.arch
    fused = {f: (suffix, parts) for suffix, parts in arch.fused for f in parts}
    done = set()
    for name, suffix in arch.layer_tensors(layer):
        if name in fused:
            fsuffix, parts = fused[name]
            if fsuffix in done:
                continue
            done.add(fsuffix)
            shapes = [_SHAPES[p][0](config) for p in parts]
            rows = sum(sh[0] for sh in shapes)
            yield fsuffix, (rows, *shapes[0][1:]), [(p, sh[0], _SHAPES[p][1]) for p, sh in zip(parts, shapes)]
            continue
        shape, transpose = _SHAPES[name]
        yield suffix, shape(config), [(name, shape(config)[0], transpose)]


def expected_tensors(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the config requires, name -> HF shape, in block order."""
    prefix = config.arch.prefix
    out: dict[str, tuple[int, ...]] = {f"{prefix}embed_tokens.weight": (config.vocab_size, config.emb_dim)}
    for i in range(config.n_layers):
        for suffix, shape, _ in _layer_tensors(config, i):
            out[f"{prefix}layers.{i}.{suffix}"] = shape
    out[f"{prefix}{config.arch.final_norm}"] = (config.emb_dim,)
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = (config.vocab_size, config.emb_dim)
    return out


@dataclass(frozen=True)
class _TensorInfo:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offsets in the file
    end: int


# the largest header the safetensors library reads (`MAX_HEADER_SIZE`, huggingface/safetensors
# safetensors/src/tensor.rs); a real checkpoint's is tens of KiB (a name, dtype, shape and offsets per tensor)
HEADER_MAX_BYTES = 100_000_000
_LENGTH_BYTES = 8  # the little-endian u64 the file starts with: the header's length


def _tensor_info(file: Path, name: str, info: Any, data_bytes: int, base: int) -> _TensorInfo:
    """One header entry, its offsets inside the file's data: else WeightsError naming the tensor."""
    try:
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = info["dtype"]
        ok = (isinstance(dtype, str) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
              and all(isinstance(x, int) and not isinstance(x, bool) for x in (begin, end))
              and 0 <= begin <= end <= data_bytes)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise WeightsError(f"{file} is not a readable safetensors file (the header's entry for tensor {name!r:.80} "
                           f"is not a dtype, a shape and data offsets within its {data_bytes} data bytes).")
    return _TensorInfo(file, dtype, shape, base + begin, base + end)


def read_header(file: Path) -> dict[str, _TensorInfo]:
    """The tensors a safetensors file's header lists. The header length (the file's first 8 bytes) is checked
    against the file's size and HEADER_MAX_BYTES before a byte of the header is read, so a length of 2^60 is
    one line naming the file, not a MemoryError; a FIFO or device is refused before it is opened."""
    try:
        st = file.stat()
        if not stat.S_ISREG(st.st_mode):
            raise WeightsError(f"{file} is not a regular file; a safetensors checkpoint must be one.")
        with file.open("rb") as f:
            prefix = f.read(_LENGTH_BYTES)
            if len(prefix) < _LENGTH_BYTES:
                raise WeightsError(f"{file} is not a readable safetensors file ({st.st_size} bytes, shorter than "
                                   f"the {_LENGTH_BYTES}-byte header length).")
            (n,) = struct.unpack("<Q", prefix)
            if n > min(HEADER_MAX_BYTES, st.st_size - _LENGTH_BYTES):
                raise WeightsError(
                    f"{file} is not a readable safetensors file (its header length {n} bytes is over "
                    + (f"the {HEADER_MAX_BYTES} bytes the safetensors library reads)." if n > HEADER_MAX_BYTES else
                       f"the {st.st_size - _LENGTH_BYTES} bytes the file holds after the length)."))
            header = json.loads(f.read(n))
    except OSError as e:
        raise WeightsError(f"{file} cannot be read ({e.strerror or e}).") from e
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise WeightsError(f"{file} is not a readable safetensors file (its header is not JSON: {e}).") from e
    if not isinstance(header, dict):
        raise WeightsError(f"{file} is not a readable safetensors file (its header is not a JSON object).")
    base = _LENGTH_BYTES + n
    return {name: _tensor_info(file, name, info, st.st_size - base, base)
            for name, info in header.items() if name != "__metadata__"}


def header_problem(folder: str | Path) -> str | None:
    """Why one of a model folder's safetensors files cannot be read (one line naming it), or None; a folder
    without any is None (`init` of a bare config; Phase 0 names the missing checkpoint). Reads headers only."""
    folder = Path(folder)
    for file in sorted(folder.glob("*.safetensors")) if folder.is_dir() else ():
        try:
            read_header(file)
        except WeightsError as e:
            return str(e)
    return None


def _index(folder: Path) -> dict[str, _TensorInfo]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise WeightsError(f"no *.safetensors files in {folder}; only safetensors checkpoints are supported.")
    tensors: dict[str, _TensorInfo] = {}
    for file in files:
        tensors.update(read_header(file))
    return tensors


def check_weights(folder: str | Path, config: ModelConfig) -> WeightsReport:
    """Compare the checkpoint's headers with what the config requires (no tensor data is read)."""
    tensors = _index(Path(folder))
    expected = expected_tensors(config)
    missing = [name for name in expected if name not in tensors]
    misshaped = [
        f"{name} has shape {list(tensors[name].shape)}, expected {list(shape)}"
        for name, shape in expected.items()
        if name in tensors and tensors[name].shape != shape
    ]
    return WeightsReport(ok=not missing and not misshaped, n_tensors=len(tensors), expected=len(expected),
                         missing=missing, misshaped=misshaped)


def _bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _file_bits(info: _TensorInfo) -> np.ndarray:
    """A BF16 tensor's bits as a read-only view of the file's mapping (uint16, no copy)."""
    raw = np.memmap(info.file, dtype=np.uint8, mode="r", offset=info.begin, shape=(info.end - info.begin,))
    return np.frombuffer(raw, dtype="<u2").reshape(info.shape)


def _read_tensor(info: _TensorInfo, bits: bool = False) -> np.ndarray:
    """float32 array holding the bf16 value of every element; with `bits`, a BF16 tensor's own bits (uint16,
    `held_bf16`'s form: 2 B an element, never a float32 copy on the way)."""
    raw = np.memmap(info.file, dtype=np.uint8, mode="r", offset=info.begin, shape=(info.end - info.begin,))
    if info.dtype == "BF16" and bits:
        return np.frombuffer(raw, dtype="<u2").astype(np.uint16).reshape(info.shape)
    if info.dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(info.shape)
    if info.dtype in ("F16", "F32"):
        values = np.frombuffer(raw, dtype="<f2" if info.dtype == "F16" else "<f4").astype(np.float32)
        return values.astype(ml_dtypes.bfloat16).astype(np.float32).reshape(info.shape)
    raise WeightsError(f"tensor dtype {info.dtype} is not supported (BF16, F16, F32 are).")


def load_weights(folder: str | Path, config: ModelConfig, shared: dict[str, np.ndarray] | None = None) -> ModelWeights:
    """Load every tensor the config requires, each projection held once (the module docstring). `shared`: bf16 bits
    (uint16, HF name -> HF layout) another holder already keeps, the HF reference's own parameters
    (`HfRunner.bf16_bits`): a tensor of the checkpoint's shape found there is held as that very array (no copy,
    the weights held once in the process, issue 48 item 3), and no fused step's concatenation is built (the
    pipeline assembles a fused step's rows per call, `NpuPipeline._gemv_w`); any other is read from the file."""
    folder = Path(folder)
    report = check_weights(folder, config)
    if not report.ok:
        raise WeightsError(f"{folder}: {report.first_problem()}.")
    tensors = _index(folder)

    def read(name: str) -> np.ndarray:
        arr, info = (shared or {}).get(name), tensors[name]
        # shared only where the holder's bits are the checkpoint's own (compared in place, through the file's
        # mapping: a loader that converted a tensor on the way is never fed to the pipeline)
        if (arr is not None and arr.dtype == np.uint16 and arr.shape == info.shape and info.dtype == "BF16"
                and np.array_equal(arr, _file_bits(info))):
            return arr
        return _read_tensor(info, bits=True)

    return weights_from(read, folder, config, fuse=not shared)


def bf16_checkpoint(folder: str | Path) -> bool:
    """Whether every tensor of the folder's safetensors files is stored as BF16: the HF reference then holds the
    checkpoint's own bits (transformers loads it in bf16 without a cast), so the pipeline may share them."""
    try:
        return all(t.dtype == "BF16" for t in _index(Path(folder)).values())
    except WeightsError:
        return False


def weights_from(read, folder: str | Path, config: ModelConfig, fuse: bool = True) -> ModelWeights:
    """`ModelWeights` from `read(hf_name) -> array` (HF layout; float32 of bf16 values, or bf16 bits as uint16),
    each projection and the embedding / LM head held once as bf16 bits (`_held`), a projection as its (out, in)
    rows with its (in, out) field a view of them; the norms and other small tensors float32; RoPE scaling from the
    folder's config.json. A 4-bit deployment's host dequantisation reads its bundle through this
    (npu_kernels.model.q4nx_bundle). `fuse=False`: no fused step's rows are concatenated (`load_weights`'s
    `shared`)."""
    folder = Path(folder)

    def get(name: str, transpose: bool = False) -> np.ndarray:
        arr = widened(read(name))
        return np.ascontiguousarray(arr.T) if transpose else np.array(arr)

    arch, prefix = config.arch, config.arch.prefix
    fold = np.float32(arch.norm_offset)

    def norm(arr: np.ndarray) -> np.ndarray:
        """A norm weight as the kernel applies it: `1+w` folded at load where the family stores w (in float32,
        then bf16, as HF's Gemma3 RMSNorm multiplies by 1 + w in float32)."""
        return _bf16(arr + fold) if arch.norm_offset else arr

    layers, derived = [], {}
    for i in range(config.n_layers):
        fields: dict[str, np.ndarray] = {}
        held: dict[str, np.ndarray] = {}  # projection -> its (out, in) rows, C-contiguous
        for suffix, _, parts in _layer_tensors(config, i):
            arr, row = read(f"{prefix}layers.{i}.{suffix}"), 0
            for name, rows, transpose in parts:
                block = arr[row : row + rows] if len(parts) > 1 else arr
                block = block.reshape(rows, -1) if block.ndim == 3 else block  # HF's Conv1d (E, 1, k) -> (E, k)
                row += rows
                if name in HELD_AS_ROWS:
                    held[name] = _held(block)
                    continue
                block = np.ascontiguousarray(widened(block).T) if transpose else np.array(widened(block))
                fields[name] = norm(block) if name in NORM_FIELDS else block
            del arr
        for fused, parts in FUSED_ROWS.items():  # one array per fused step; its parts are row blocks of it
            if fuse and all(p in held for p in parts):
                same = len({held[p].dtype for p in parts}) == 1  # else all float32: never a uint16 widened as a number
                whole = np.concatenate([held[p] if same else widened(held[p]) for p in parts], axis=0)
                derived[("rows", i, fused)] = whole
                row = 0
                for p in parts:
                    held[p], row = whole[row : row + held[p].shape[0]], row + held[p].shape[0]
        for name, rows_ in held.items():
            derived[("rows", i, name)] = rows_
            fields[name] = rows_.T  # (in, out): a view of the rows
        layers.append(LayerWeights(**{**dict.fromkeys(("wq", "wk", "wv", "wo")), **fields}))
    embed = _held(read(f"{prefix}embed_tokens.weight"))
    lm_head = embed if config.tie_word_embeddings else _held(read("lm_head.weight"))
    try:
        scaling = rope_scaling(load_raw_config(folder))
    except ValueError:
        scaling = None
    return ModelWeights(config=config, embed=embed, final_norm=norm(get(f"{prefix}{arch.final_norm}")), lm_head=lm_head,
                        layers=layers, rope_scaling=scaling, derived=derived)


def _held(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of a weight read from a checkpoint, as bf16 bits (uint16) where every value is a bf16
    (always, for a BF16 checkpoint), else float32 (`held_bf16`): the pipeline's one copy of it."""
    if arr.dtype == np.uint16:  # bits read for this holder (`_read_tensor`) or shared with another: kept as they are
        return np.ascontiguousarray(arr)
    return held_bf16(np.array(arr, np.float32, order="C"))


def read_checkpoint(folder: str | Path, config: ModelConfig) -> dict[str, np.ndarray]:
    """Every tensor the config requires as the checkpoint stores it (HF names, (out, in), float32 arrays of bf16
    values; norm weights unfolded)."""
    report = check_weights(folder, config)
    if not report.ok:
        raise WeightsError(f"{folder}: {report.first_problem()}.")
    tensors = _index(Path(folder))
    return {name: _read_tensor(tensors[name]) for name in expected_tensors(config)}


# -- fused projections in a 4-bit bundle (npu_kernels.model.features.fused_projections) --

_LLAMA_SUFFIX = dict(LLAMA_TENSORS)


def unfused_tensors(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """`expected_tensors` with every fused tensor replaced by its parts under their Llama names (q_proj / k_proj /
    v_proj, gate_proj / up_proj), in block order: what a 4-bit bundle of the family stores (mlir-air's Phi-4-mini
    bundle is written split, phi4_mini_q4nx_weights.py:9-15 at e972f29)."""
    prefix, fused = config.arch.prefix, dict(config.arch.fused)
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in expected_tensors(config).items():
        rest = name[len(prefix):].split(".", 2) if name.startswith(f"{prefix}layers.") else None
        parts = fused.get(rest[2]) if rest else None
        if not parts:
            out[name] = shape
            continue
        layer = rest[1]
        for p in parts:
            out[f"{prefix}layers.{layer}.{_LLAMA_SUFFIX[p]}"] = (hf_rows(config, p), shape[1])
    return out


def split_fused(tensors: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """HF-named tensors (fused as the checkpoint stores them) -> the unfused names of `unfused_tensors`."""
    out, by_part = {}, _fused_parts(config)
    for name in unfused_tensors(config):
        if name in tensors:
            out[name] = tensors[name]
            continue
        fused_name, start, rows = by_part[name]
        out[name] = tensors[fused_name][start : start + rows]
    return out


def fuse(tensors: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """Unfused tensors (`unfused_tensors` names; any subset) -> HF names as the family's checkpoints store them:
    each fused tensor whose parts are all present is their rows concatenated in the family's order."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for part, (fused_name, start, _) in _fused_parts(config).items():
        groups.setdefault(fused_name, []).append((start, part))
    out = {name: a for name, a in tensors.items() if not any(name == p for g in groups.values() for _, p in g)}
    for fused_name, parts in groups.items():
        if all(p in tensors for _, p in parts):
            out[fused_name] = np.concatenate([tensors[p] for _, p in sorted(parts)], axis=0)
    return out


def _fused_parts(config: ModelConfig) -> dict[str, tuple[str, int, int]]:
    """unfused name -> (fused HF name, first row, rows)."""
    prefix, out = config.arch.prefix, {}
    for i in range(config.n_layers):
        for suffix, parts in config.arch.fused:
            start = 0
            for p in parts:
                rows = hf_rows(config, p)
                out[f"{prefix}layers.{i}.{_LLAMA_SUFFIX[p]}"] = (f"{prefix}layers.{i}.{suffix}", start, rows)
                start += rows
    return out
