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
  thread id <= 20), within the workspace file system's PATH_MAX;
* form: a name is recorded in Unicode NFC (`normalised`), so `café` typed precomposed or decomposed is one name;
* look-alikes: a name is refused when it is confusable with an existing deployment's (`confusable_with`): equal
  `skeleton`s, after NFKC (fullwidth, mathematical and ligature forms), case folding and Unicode's confusable
  prototypes (UTS #39 confusables.txt) for Latin, IPA, Greek and Cyrillic look-alikes of ASCII letters and digits
  and for dashes (`CONFUSABLE_PROTOTYPES`: `tiny` and `tіny` with a Cyrillic i, `llama_1b` and `IIama_lb`).
  What it does not catch: the look-alikes of other scripts (Armenian, Cherokee, Lisu ... : the rest of
  confusables.txt, not carried here), look-alikes of non-ASCII letters (Greek against Cyrillic), and sequences
  TR39 does not list (`cl` / `d`).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import Iterable

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

# source code point : prototype, from Unicode's confusables.txt (UTS #39; version 13.0.0 of 2020-02-13 here): the
# sources below U+0530 (Latin, IPA, Greek, Cyrillic) and the dashes whose prototype is ASCII letters, digits or '-',
# less those NFKC + casefold already fold (scripts/confusables_subset.py prints this from the file)
CONFUSABLE_PROTOTYPES: dict[str, str] = {chr(int(cp, 16)): target for cp, target in (item.split(":") for item in (
    "0030:O 0031:l 0049:l 006D:rn 007C:l 00C6:AE 00D7:x 00E6:ae 0131:i 0132:lJ 0152:OE 0153:oe 017F:f 0184:b 018D:g "
    "0196:l 01A6:R 01A7:2 01B7:3 01BC:5 01BD:s 01C0:l 01C1:ll 021C:3 0222:8 0223:8 0251:a 0261:g 0263:y 0269:i "
    "026A:i 026F:w 028B:u 028F:y 02A3:dz 02A6:ts 02AA:ls 02AB:lz 02D7:- 02DB:i 037A:i 037F:J 0391:A 0392:B 0395:E "
    "0396:Z 0397:H 0399:l 039A:K 039C:M 039D:N 039F:O 03A1:P 03A4:T 03A5:Y 03A7:X 03B1:a 03B3:y 03B9:i 03BD:v 03BF:o "
    "03C1:p 03C3:o 03C5:u 03D2:Y 03DC:F 03E8:2 03F1:p 03F2:c 03F3:j 03F9:C 03FA:M 0405:S 0406:l 0408:J 0410:A 0412:B "
    "0415:E 0417:3 041A:K 041C:M 041D:H 041E:O 0420:P 0421:C 0422:T 0423:Y 0425:X 042B:bl 042C:b 042E:lO 0430:a "
    "0431:6 0433:r 0435:e 043E:o 0440:p 0441:c 0443:y 0445:x 0455:s 0456:i 0458:j 0461:w 0474:V 0475:v 04AE:Y 04AF:y "
    "04BB:h 04BD:e 04C0:l 04CF:i 04D4:AE 04D5:ae 04E0:3 0501:d 050C:G 051B:q 051C:W 051D:w 2010:- 2011:- 2012:- "
    "2013:- 2043:- 2212:- 2796:- FE58:-"
).split())}


def normalised(name: str) -> str:
    """The form a deployment name is recorded in: Unicode NFC."""
    return unicodedata.normalize("NFC", name)


def _prototypes(text: str) -> str:
    return "".join(CONFUSABLE_PROTOTYPES.get(c, c) for c in text)


def skeleton(name: str) -> str:
    """What `name` looks like (UTS #39's skeleton, with case folded and a limited table, module docstring): NFKC,
    confusable prototypes, case folded, prototypes again (an `M` folds to `m`, whose prototype is `rn`)."""
    folded = unicodedata.normalize("NFKC", _prototypes(unicodedata.normalize("NFKC", name))).casefold()
    return unicodedata.normalize("NFC", _prototypes(folded))


def confusable_with(name: str, others: Iterable[str]) -> str | None:
    """The first of `others` (existing deployment names) that is not `name` but looks like it, or None."""
    mine = skeleton(name)
    return next((o for o in others if o != name and skeleton(o) == mine), None)


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
