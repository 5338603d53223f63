"""Deployment names: refused at `ledger init` unless every projection and file system here can hold them.

A name is printed by the CLI and becomes path components: `llms/<model_dir_name(name)>/` under the workspace
(registry.model_docs, every file in `DOC_FILES` below it) and, through `ledger scaffold`, the folder
`programming_examples/llms/<name>/` of an mlir-air checkout with `<name>_inference.py` in it
(npu_kernels.mlir_air.scaffold), a folder mlir-air's own model directories fill with `<name>_cpu_helpers.py`,
`<name>_decode.py`, `<name>_prefill.py`, `<name>_weights.py` (programming_examples/llms/llama32_1b/ at mlir-air
e972f29). So:

* characters: every one printable (no newline, tab, control, invisible format or line-separator character;
  `str.isprintable`), no leading or trailing space;
* length: the longest component holding the name, `<name>_cpu_helpers.py`, within NAME_MAX = 255 bytes (ext4,
  xfs, btrfs, tmpfs, APFS; NTFS counts 255 UTF-16 units) -> 240 characters of `model_dir_name(name)` (ASCII:
  one byte each); and the longest path the projections write under the workspace, `llms/<name>/` + the
  longest of DOC_FILES + the writer's temporary-file suffix (`.<file>.<pid>.<thread id>.tmp`, pid <= 7 digits,
  thread id <= 20), within the workspace file system's PATH_MAX.
"""

from __future__ import annotations

import os
from pathlib import Path

from registry.model_docs import DOC_FILES, FOLDER_MAX
from registry.text import shown

NAME_MAX = 255  # bytes per path component on every file system listed above
# files named after the model in its mlir-air directory: the scaffold's, and mlir-air's own (llama32_1b)
MODEL_DIR_FILE_SUFFIXES = ("_inference.py", "_cpu_helpers.py", "_decode.py", "_prefill.py", "_weights.py")
LONGEST_SUFFIX = max(MODEL_DIR_FILE_SUFFIXES, key=len)
MAX_NAME_LENGTH = NAME_MAX - len(LONGEST_SUFFIX)
TMP_SUFFIX_MAX = len("." + "." + "9" * 7 + "." + "9" * 20 + ".tmp")  # handlers.registry_ops' temporary file
LONGEST_DOC = max(DOC_FILES, key=len)
assert FOLDER_MAX == MAX_NAME_LENGTH  # model_dir_name cuts older over-long names to the same bound


def max_name_length(workspace: str | os.PathLike | None = None) -> int:
    """The longest name the projections can hold (in the workspace, when given: its PATH_MAX counts too)."""
    if workspace is None:
        return MAX_NAME_LENGTH
    ws = Path(workspace).resolve()
    try:
        path_max = os.pathconf(ws if ws.exists() else ws.parent, "PC_PATH_MAX")
    except (OSError, ValueError):
        path_max = 4096
    fixed = len(os.fsencode(ws)) + len("/llms/") + len("/") + len(LONGEST_DOC) + TMP_SUFFIX_MAX
    return max(0, min(MAX_NAME_LENGTH, path_max - 1 - fixed))


def name_problem(name: str, workspace: str | os.PathLike | None = None) -> str | None:
    """Why `name` cannot be a deployment's name (one line), or None."""
    if not name or not name.strip():
        return "a deployment name cannot be empty"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return (f"deployment name {shown(name)[:80]} contains U+{ord(bad):04X} (a newline, control or invisible "
                "character): names are printed in status lines and become folder names")
    if name != name.strip():
        return f"deployment name {name[:80]!r} starts or ends with a space"
    limit = max_name_length(workspace)
    length = len(name) + (0 if name.strip(".") else 1)  # model_dir_name's length before it cuts an old name
    if length > limit:
        return (f"deployment name {name[:40]!r}... is {length} characters; at most {limit} fit (the folder "
                f"llms/<name>/ and the model directory's <name>{LONGEST_SUFFIX} in a {NAME_MAX}-byte path component, "
                f"llms/<name>/{LONGEST_DOC} under the workspace)")
    return None
