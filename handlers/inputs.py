"""Files a person or an agent hands the tool: regular files under a size cap, read with a bound, and (for an MCP
tool) only from inside the folders the server was started for.

A text handed in whole (a lesson, a resume note, an MCP tool's log to triage) gets the same caps
(`bounded_text`).

Every path a command reads as input (a harness transcript, a log to triage, a nightly history, a registry's
markdown and JSON, a model's config.json and tokenizer.json, a Q4NX bundle) goes through `input_file` /
`read_input`: the path is stat'ed before it is opened and refused in one line (`InputError`) unless it is a
regular file no larger than its cap, so a FIFO (which would block forever), a device (`/dev/zero`, read without
end) or a folder never reaches a parser. The file is then opened non-blocking (a FIFO swapped in after the stat
cannot block), checked again on its descriptor, and read to at most cap + 1 bytes. Standard input (`-`) is read
with the same bound; `parsed_json` names the line and column where a JSON input breaks.

The caps are generous against the largest real input of each kind (`CAPS`); a bigger file is refused, not cut.
`confined(path, roots)` is the MCP server's rule: a path is used only when it resolves (symbolic links
followed) inside the workspace or a folder named with `ledger mcp --allow-dir`; a folder only when no symbolic
link under it (a model folder's config.json or safetensors, a registry's JSON) resolves outside them either.
Imported by handlers.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from registry.text import escaped

MiB = 1 << 20
GiB = 1 << 30
# a harness transcript is a few KiB (one [precision] line, a latency line, a verdict; a failing one up to 20
# mismatch lines); a model directory's `make verify` / profile log a few MiB at most
TRANSCRIPT_MAX_BYTES = 16 * MiB
# mlir-air's nightly history.ndjson gains one ~0.5 KiB line per model per night: decades fit in 64 MiB
HISTORY_MAX_BYTES = 64 * MiB
# a kernel registry's markdown pages and details/*.json are tens of KiB each
REGISTRY_FILE_MAX_BYTES = 16 * MiB
# a HF config.json is 1-10 KiB (Gemma3's, with its nested text and vision configs, ~2 KiB)
CONFIG_MAX_BYTES = 1 * MiB
# a HF tokenizer.json: Gemma3's (262144 pieces with their scores, the largest vocabulary in scope) is ~33 MB, Llama-3's
# ~9 MB, Qwen's ~7 MB; 128 MiB is 4x Gemma3's, the headroom size_bounds gives a config's sizes (a 4x vocabulary)
TOKENIZER_MAX_BYTES = 128 * MiB
# a Q4NX bundle of the largest model in scope (Llama-3.1-8B: 8.0e9 weights at 4 bits + a bf16 scale per 32 and
# bf16 embeddings) is ~6 GiB; checked by stat only (the bundle reader reads tensors, not the whole file)
BUNDLE_MAX_BYTES = 24 * GiB
# a lesson or a resume note is a sentence or a paragraph; typed as one command-line argument it cannot pass Linux's
# MAX_ARG_STRLEN (32 pages: 128 KiB), the bound `ledger lesson` / `resume --note` always had
NOTE_MAX_BYTES = 128 * 1024
CAPS = {"transcript": TRANSCRIPT_MAX_BYTES, "log": TRANSCRIPT_MAX_BYTES, "evidence": CONFIG_MAX_BYTES,
        "history": HISTORY_MAX_BYTES, "registry file": REGISTRY_FILE_MAX_BYTES, "config": CONFIG_MAX_BYTES,
        "bundle": BUNDLE_MAX_BYTES, "lesson": NOTE_MAX_BYTES, "note": NOTE_MAX_BYTES, "tokenizer": TOKENIZER_MAX_BYTES}


class InputError(ValueError):
    """Raised when an input path is not a regular file, is over its cap, or (MCP) lies outside the allowed
    folders; the message is one line and holds nothing read from the file."""


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _size_text(n: int) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def input_file(path: str | os.PathLike, what: str) -> Path:
    """`path` when it is a regular file within the cap of `what` (a key of `CAPS`); else `InputError`."""
    p = Path(path)
    cap = CAPS[what]
    try:
        st = p.stat()  # follows a symbolic link: what would be opened
    except OSError as e:
        raise InputError(f"cannot read {what} {p}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p} is {_kind(st.st_mode)}, not a regular file; refused")
    if st.st_size > cap:
        raise InputError(f"{what} {p} is {_size_text(st.st_size)}, over the {_size_text(cap)} a {what} may be; "
                         "refused")
    return p


def _read_bounded(f: BinaryIO, cap: int, what: str, label: str) -> bytes:
    data = f.read(cap + 1)
    if len(data) > cap:
        raise InputError(f"{what} {label} is over the {_size_text(cap)} a {what} may be; refused")
    return data


def bounded_text(text: str, what: str) -> str:
    """`text` handed in whole (a CLI or an MCP argument: a lesson, a note, a log to triage) when its UTF-8 is within
    the cap of `what`, as `read_input` bounds a file or standard input of that kind; else `InputError`, quoting
    nothing of it."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > CAPS[what]:
        raise InputError(f"the {what} text is {_size_text(size)}, over the {_size_text(CAPS[what])} a {what} may be; "
                         "refused")
    return text


def read_input(path: str | os.PathLike, what: str) -> bytes:
    """The bytes of input `path` (`-`: standard input), bounded by the cap of `what`; `InputError` for anything
    but a regular file within it."""
    cap = CAPS[what]
    if str(path) == "-":
        return _read_bounded(sys.stdin.buffer, cap, what, "on standard input")
    p = input_file(path, what)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise InputError(f"cannot read {what} {p}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):  # swapped after the stat
            raise InputError(f"{what} {p} is {_kind(mode)}, not a regular file; refused")
        return _read_bounded(f, cap, what, str(p))


def read_input_text(path: str | os.PathLike, what: str) -> str:
    """`read_input` decoded as UTF-8 (undecodable bytes replaced, as a transcript is hashed and parsed)."""
    return read_input(path, what).decode("utf-8", errors="replace")


def _inside(path: Path, allowed: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in allowed)


def parsed_json(data: bytes, what: str, label: str | os.PathLike) -> Any:
    """`data` (an input's bytes) parsed as UTF-8 JSON; else `InputError` naming where it breaks, in one line."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {label} is not UTF-8 (byte {e.start}); refused") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {label} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
                         "refused") from None
    except RecursionError:
        raise InputError(f"{what} {label} nests JSON deeper than the parser goes; refused") from None


def confined(path: str | os.PathLike, roots: Iterable[Path], what: str) -> Path:
    """`path` resolved, when it lies inside one of `roots` (resolved too) and, for a folder, every symbolic link
    under it does too (`link_out_of`); else `InputError` naming the roots."""
    resolved = Path(path).expanduser().resolve()
    allowed = [Path(r).resolve() for r in roots]
    where = (f"the folders this server may read ({', '.join(map(str, allowed))}); start it with "
             "`ledger mcp --allow-dir DIR`")
    if not _inside(resolved, allowed):
        raise InputError(f"{what} {path} is outside {where} to allow another")
    link = link_out_of(resolved, allowed) if resolved.is_dir() else None
    if link is not None:
        raise InputError(f"{what} {path}: {escaped(str(link))} is a symbolic link to outside {where} to allow "
                         "where it points")
    return resolved


def link_out_of(folder: Path, allowed: list[Path]) -> Path | None:
    """The first symbolic link under `folder` (as a path relative to it, walked in sorted order without following
    links) that resolves outside every `allowed` folder, or None. A `.git` folder is not walked: the tool reads
    no file in it."""
    for root, dirs, files in os.walk(folder):  # followlinks=False: a linked folder is judged here, not entered
        for name in sorted(dirs + files):
            p = Path(root, name)
            if p.is_symlink() and not _inside(p.resolve(), allowed):
                return p.relative_to(folder)
        dirs[:] = sorted(d for d in dirs if d != ".git")
    return None
