"""What every parser of mlir-air's printed output shares: `TranscriptError`, the `Verdict` type, `NUMBER` (a
number as the harnesses print it), `clean_lines`, the lines an error message quotes, and `sha256_text` (the
provenance hash of a transcript).

The parsers are one module per format: `transcript` (a kernel harness, XRTRunner), `profile` (`make
profile`), `verify_report` / `diagnosis_report` (a model directory's `make verify` / `make diagnosis`),
`walk_report` (`make verify-walk`). Anyone may import this module; it imports nothing of the project.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

Verdict = Literal["PASS", "FAIL"]

# a number as mlir-air's harnesses print it (nan / inf included); every output parser uses this one
NUMBER = r"[-+]?(?:nan|inf|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class TranscriptError(ValueError):
    """Raised when a harness/verify transcript or report matches none of the known formats, is truncated,
    or contradicts itself. `transcript` holds the text (when there is one) so a caller can triage it."""

    def __init__(self, message: str, transcript: str | None = None) -> None:
        super().__init__(message)
        self.transcript = transcript


def sha256_text(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of `text` (the provenance hash of a transcript)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def clean_lines(text: str) -> list[str]:
    """The transcript's lines, any line ending, ANSI colour codes removed, each stripped."""
    return [_ANSI.sub("", line).strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def exception_line(lines: list[str]) -> str:
    """The exception a Python traceback ends with (`AssertionError: ...`), else the last line."""
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line):
            return line if len(line) <= 200 else line[:197] + "..."
    return last_words(lines)


def last_words(lines: list[str]) -> str:
    """The last non-blank line (cut to 160 characters): what an error message quotes of a transcript."""
    for line in reversed(lines):
        if line:
            return line if len(line) <= 160 else line[:157] + "..."
    return ""
