"""`ledger init`: a deployment begins. The model's config is read, the architecture assessed and, in scope, the
config resolved; one batch records the request, the assessment and the resolved config.

A name the projections cannot hold (registry.names) or that would share another deployment's `llms/<folder>/`
is refused before anything is written. Imported through `handlers.deploy`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from handlers.doctor import checkout_refusal, lower_first
from handlers.inputs import InputError, input_file, parsed_json, read_input
from handlers.uow import DeploymentError, DeploymentUnit
from npu_kernels.model.architecture import assess, default_name, load_raw_config, malformed_config, resolve
from npu_kernels.model.host_memory import machine_memory_bytes, memory_need, memory_problem
from npu_kernels.model.plan import DEFAULT_SEQ
from npu_kernels.model.q4nx_bundle import bundle_problem
from npu_kernels.backends.model_backends import backend_type
from npu_kernels.model.q4nx_device import STYLES
from npu_kernels.model.size_bounds import size_problem
from npu_kernels.model.weights import header_problem
from npu_kernels.model.digest import model_digest
from npu_kernels.model.options import SPEC_FAULTS
from npu_kernels.model.speculative import DEFAULT_BLOCK, MAX_BLOCK
from ledger import Ledger
from ledger.events import ArchitectureAssessed, ConfigResolved, DeploymentRequested
from registry.model_docs import model_dir_name
from registry.names import confusable_with, name_problem, normalised, skeleton
from ledger.streams import DEPLOYMENT_PREFIX, deployment_name


class OutOfScope(DeploymentError):
    """Raised when `init` assessed the architecture as out of scope (the assessment is recorded)."""


def init(
    ledger: Ledger,
    model: str,
    *,
    name: str | None = None,
    target: str = "npu2",
    dtype: str = "bf16",
    executor: str = "emulated",
    pipeline: dict[str, Any] | None = None,
    workspace: Path | None = None,
    base: str | None = None,
    q4nx_style: str = "host",
    drafter: str | None = None,
    draft_block: int = DEFAULT_BLOCK,
    drafter_faults: tuple[str, ...] = (),
) -> str:
    """Record a new deployment of the model at `model` (HF folder or config.json); return its name.

    With `base` (dtype q4nx), `model` is a Q4NX bundle and `base` the bf16 HF folder whose config and tokenizer
    it is deployed with: a bundle the config cannot read (a missing or mis-shaped tensor, a scale dtype other
    than bf16, non-zero padding) is refused in one line; model_path becomes the dequantised reference folder
    Phase 0 writes under the workspace (`reference_folder`). `--dtype fp16` is refused: no pipeline runs fp16
    (the weights were read as bf16 and the flag ignored before issue #26). `q4nx_style`: "host" (dequantised at
    load, the bf16 pipeline: qwen3_0_6b_q4nx) or "device" (dequant_q4nx at load for the prefill, the decode's
    4-bit GEMVs on re-quantised codes and the fused one-dispatch decode: llama32_1b_q4nx); the device style runs
    on the in-process executors only (mlir-air's fused decode is not driven yet).

    A name the projections cannot hold (registry.names: length, control characters) is refused first; the name is
    recorded in NFC, and one confusable with an existing deployment's is refused (registry.names.confusable_with).

    With `drafter` (issue 46 item 3), a smaller HF folder with the model's vocabulary is declared for speculative
    decoding: Phase 5 accepts speculation only if its greedy tokens equal those without it on every gate prompt
    (handlers.gates.speculation); `draft_block` tokens are drafted per round; `drafter_faults` are the speculative
    loop's test faults (drills; tests only). A mismatched vocabulary, a drafter no smaller than the model, or an
    executor whose backend runs no speculation is refused in one line (mlir-air runs it through the model
    directory's `make dflash-exactness`, handlers.gates.speculation)."""
    if drafter is not None and not backend_type(executor).runs_speculation:
        raise DeploymentError(f"--drafter is not driven on --executor {executor}; nothing was recorded")
    _refuse_request(dtype, base, q4nx_style, executor)
    path = Path(model).expanduser().resolve()
    bundle = path if base is None else (path / "model.q4nx" if path.is_dir() else path)
    if base is not None:
        path = Path(base).expanduser().resolve()
    name = normalised(name or default_name(path))  # NFC: one name however its accents were typed
    raw, unit = _read_config(ledger, name, path, bundle, base, workspace)
    folder = path if path.is_dir() else path.parent
    config_file = folder / "config.json" if path.is_dir() else path
    quantisation: dict[str, Any] = {}
    assessment = assess(raw)
    if base is not None:
        quantisation = _quantisation(name, raw, assessment, bundle, folder, q4nx_style)
        folder = reference_folder(workspace or Path.cwd(), name)
    declared = ({} if drafter is None or not assessment.in_scope
                else drafter_record(drafter, raw, folder, draft_block, drafter_faults))
    requested = DeploymentRequested(
        model_path=str(folder), name=name, target=target, dtype=dtype, executor=executor,
        hf_model_id=raw.get("_name_or_path") or None, pipeline=pipeline or {}, quantisation=quantisation,
        drafter=declared,
    )
    events: list = [requested, ArchitectureAssessed(**assessment.event_fields())]
    if assessment.in_scope:
        cfg = resolve(raw)
        limit = cfg.arch.rope_max_positions
        if limit is not None and limit < DEFAULT_SEQ:  # LongRoPE's long factors are not implemented
            raise DeploymentError(f"{name}: the compiled sequence {DEFAULT_SEQ} is past original_max_position_embeddings "
                                  f"{limit}, where LongRoPE's long factors apply (not implemented); nothing was recorded")
        # a model this machine cannot hold is refused before anything is recorded (npu_kernels.model.host_memory)
        too_big = memory_problem(memory_need(cfg, executor), machine_memory_bytes())
        if too_big:
            raise DeploymentError(f"{name}: {too_big}; nothing was recorded")
        digest = hashlib.sha256(config_file.read_bytes()).hexdigest()
        events.append(ConfigResolved(**cfg.to_dict(), source_sha256=digest))
    unit.commit(events)
    if not assessment.in_scope:
        raise OutOfScope(f"{name}: {assessment.architecture} is out of scope: " + " ".join(assessment.reasons))
    return name


def drafter_record(drafter: str, raw: dict[str, Any], folder: Path, block: int,
                   faults: tuple[str, ...] = ()) -> dict[str, Any]:
    """DeploymentRequested.drafter for the drafter folder `drafter` of the model whose config is `raw` (its folder
    `folder`), or a DeploymentError in one line: not a folder with an in-scope config, another vocabulary (size or
    tokens), not smaller than the model, a block outside 1..MAX_BLOCK, an unknown test fault."""
    path = Path(drafter).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise DeploymentError(f"--drafter {path} is not a model folder with a config.json; nothing was recorded")
    if not 1 <= int(block) <= MAX_BLOCK:
        raise DeploymentError(f"--draft-block {block} is outside 1..{MAX_BLOCK}; nothing was recorded")
    unknown = sorted(set(faults) - SPEC_FAULTS)
    if unknown:
        raise DeploymentError(f"unknown speculation test faults {unknown} (known: {sorted(SPEC_FAULTS)}); nothing was "
                              "recorded")
    d_raw = load_raw_config(path)
    problem = size_problem(d_raw) or malformed_config(d_raw)
    assessment = assess(d_raw)
    if problem or not assessment.in_scope:
        why = problem or f"{assessment.architecture} is out of scope"
        raise DeploymentError(f"--drafter {path}: {why}; nothing was recorded")
    d_cfg, t_cfg = resolve(d_raw), resolve(raw)
    if d_cfg.vocab_size != t_cfg.vocab_size:
        raise DeploymentError(f"--drafter {path} has vocabulary size {d_cfg.vocab_size}, the model "
                              f"{t_cfg.vocab_size}: a drafter must share the model's tokenizer; nothing was recorded")
    differs = _vocab_difference(path, folder)
    if differs:
        raise DeploymentError(f"--drafter {path}: {differs}: a drafter must share the model's tokenizer; nothing was "
                              "recorded")
    d_size, t_size = d_cfg.n_layers * d_cfg.emb_dim, t_cfg.n_layers * t_cfg.emb_dim
    if d_size >= t_size:
        raise DeploymentError(f"--drafter {path} is not smaller than the model ({d_cfg.n_layers} layers x "
                              f"{d_cfg.emb_dim} against {t_cfg.n_layers} x {t_cfg.emb_dim}); nothing was recorded")
    record = {"path": str(path), "digest": model_digest(path).digest,
              "config_sha256": hashlib.sha256((path / "config.json").read_bytes()).hexdigest(),
              "vocab_size": d_cfg.vocab_size, "n_layers": d_cfg.n_layers, "hidden_size": d_cfg.emb_dim,
              "block": int(block)}
    if faults:
        record["faults"] = sorted(faults)
    return record


def _vocab_difference(drafter: Path, folder: Path) -> str | None:
    """How the two folders' tokenizer.json vocabularies differ (None: the same, or a folder has no tokenizer.json)."""
    files = [drafter / "tokenizer.json", folder / "tokenizer.json"]
    if not all(f.is_file() for f in files):
        return None
    from tokenizers import Tokenizer

    try:
        ours, theirs = (Tokenizer.from_file(str(f)).get_vocab(with_added_tokens=True) for f in files)
    except Exception as e:  # noqa: BLE001 - the library raises a bare Exception for a file it cannot load
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"a tokenizer.json the tokenizers library does not load ({why})"
    if ours == theirs:
        return None
    diff = sorted(set(ours.items()) ^ set(theirs.items()))
    return f"its tokenizer maps {len(diff)} (token, id) pairs differently (first {diff[0]!r})"


def _refuse_request(dtype: str, base: str | None, q4nx_style: str, executor: str) -> None:
    """The requests `init` refuses before it reads anything, each in one line."""
    if dtype == "fp16":
        raise DeploymentError("--dtype fp16 is not implemented: every pipeline runs bf16 weights (use bf16, or q4nx "
                              "with --base); nothing was recorded")
    if (dtype == "q4nx") != (base is not None):
        raise DeploymentError("a Q4NX bundle needs --dtype q4nx and --base HF_FOLDER (its config and tokenizer) "
                              "together; nothing was recorded")
    if q4nx_style not in STYLES:
        raise DeploymentError(f"unknown --q4nx-style {q4nx_style!r} (known: {', '.join(STYLES)}); nothing was recorded")
    if q4nx_style == "device" and (base is None or not backend_type(executor).runs_q4nx_device):
        raise DeploymentError("--q4nx-style device needs a Q4NX bundle with --base, on the emulated or torch "
                              "executor (mlir-air's fused 4-bit decode is not driven by this tool yet); nothing "
                              "was recorded")
    refusal = checkout_refusal(executor)
    if refusal:
        raise DeploymentError(f"--executor {executor} needs an mlir-air checkout and {lower_first(refusal)}; nothing "
                              "was recorded")


def _read_config(ledger: Ledger, name: str, path: Path, bundle: Path, base: str | None, workspace: Path | None):
    """(the raw config, the new deployment's unit): the name, the input files and the config's sizes checked, and
    the name free (no stream, no projected folder), or one line saying which is not."""
    problem = name_problem(name, workspace)
    if problem:
        raise DeploymentError(problem)
    for file, what in ((path / "config.json" if path.is_dir() else path, "config"), (bundle, "bundle")):
        if what == "config" or base is not None:
            if file.exists() or file.is_symlink():  # a missing one is the reader's to name
                input_file(file, what)  # a regular file under its cap: no FIFO, device or folder (handlers.inputs)
    raw = load_raw_config(path)  # malformed or missing config: ModelConfigError, nothing recorded
    problem = size_problem(raw)  # 1e5 layers: refused before the resolved config is built or recorded
    if problem:
        raise DeploymentError(problem)
    problem = malformed_config(raw)  # a factor of 0, layer_types of another length: before the assessment records
    if problem:
        raise DeploymentError(problem)
    problem = header_problem(path if path.is_dir() else path.parent)  # a 2^60 header length: the file named
    if problem:
        raise DeploymentError(f"{problem[:-1] if problem.endswith('.') else problem}; nothing was recorded")
    _check_tokenizer(path if path.is_dir() else path.parent)
    unit = DeploymentUnit(ledger, name, must_exist=False)
    if unit.events:
        raise DeploymentError(f"deployment {name!r} exists already (use --name to start another)")
    _refuse_folder_clash(ledger, name)
    _refuse_confusable(ledger, name)
    return raw, unit


def _check_tokenizer(folder: Path) -> None:
    """The folder's tokenizer.json, when it has one, read under its cap (handlers.inputs) and loaded as the
    phases will load it (the `tokenizers` library transformers' fast tokenizers are); else one line naming it."""
    file = folder / "tokenizer.json"
    if not (file.exists() or file.is_symlink()):
        return  # a bare config, or a sentencepiece tokenizer.model: the phases that need one name it
    try:
        data = read_input(file, "tokenizer")
        parsed_json(data, "tokenizer", file)  # names the line and column where the JSON breaks
    except InputError as e:
        raise DeploymentError(f"{e}, nothing was recorded") from None
    from tokenizers import Tokenizer  # 45 ms to import (python -X importtime), paid by `init` only

    try:
        Tokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - the library raises a bare Exception for a file it cannot load
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DeploymentError(f"tokenizer {file} is not one the tokenizers library loads ({why}); refused, nothing "
                              "was recorded") from None


def _quantisation(name: str, raw: dict, assessment, bundle: Path, folder: Path, q4nx_style: str) -> dict[str, Any]:
    """A Q4NX deployment's `quantisation` record, once its bundle is one the base config reads."""
    if not assessment.in_scope:
        raise DeploymentError(f"{name}: {assessment.architecture} is out of scope; nothing was recorded")
    problem = bundle_problem(bundle, resolve(raw)) if bundle.is_file() else f"no Q4NX bundle at {bundle}"
    if problem:
        raise DeploymentError(f"{problem}; nothing was recorded")
    quantisation = {"format": "q4nx", "bundle": str(bundle), "base": str(folder)}
    if q4nx_style != "host":  # a host-style request records no style: streams from before #26's device style
        quantisation["style"] = q4nx_style
    return quantisation


def reference_folder(workspace: Path, name: str) -> Path:
    """Where Phase 0 writes a 4-bit deployment's dequantised reference (an HF folder; derived, re-derivable)."""
    return (Path(workspace) / ".ledger" / "q4nx" / model_dir_name(name)).resolve()


def _refuse_confusable(ledger: Ledger, name: str) -> None:
    """A name that looks like an existing deployment's (registry.names.skeleton) would let one be taken for the
    other in every status line and command: refused, naming the other."""
    other = confusable_with(name, (deployment_name(s) for s in ledger.streams(DEPLOYMENT_PREFIX)))
    if other is not None:
        # ascii(): the two names written so they can be told apart (look-alikes escaped as code points)
        raise DeploymentError(f"deployment name {ascii(name)} is confusable with deployment {ascii(other)} (both "
                              f"read {ascii(skeleton(name))} once look-alike characters and case are folded: "
                              "Unicode confusables, NFKC); choose another --name; nothing was recorded")


def _refuse_folder_clash(ledger: Ledger, name: str) -> None:
    """Two deployments must not project to one llms/<folder>/ (compared case-insensitively: macOS, Windows)."""
    folder = model_dir_name(name)
    for other in (deployment_name(s) for s in ledger.streams(DEPLOYMENT_PREFIX)):
        if other != name and model_dir_name(other).lower() == folder.lower():
            raise DeploymentError(f"deployment name {name!r} projects to llms/{folder}/, the folder of deployment "
                                  f"{other!r}; choose another --name")
