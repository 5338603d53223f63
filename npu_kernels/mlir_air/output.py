"""What every parser of mlir-air's printed output shares: `TranscriptError`, the `Verdict` type, `NUMBER` (a
number as the harnesses print it), `clean_lines`, the lines an error message quotes (`failure_tail`: a failed run's traceback), and `sha256_text` (the
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


# make's own bookkeeping: `make[1]: Leaving directory '...'`, `make: *** [Makefile:40: run] Error 1`
_MAKE_LINE = re.compile(r"^\s*g?make(\[\d+\])?: ")
_ERROR_WORD = re.compile(r"\berror\b|Error:|Traceback|Exception|Assertion|FAILED|Abort|timed? ?out|TIMEOUT|"
                         r"Permission denied|No such file|exceed|exhausted|overflow", re.IGNORECASE)
# a driver's wrapper around the error it ran into: `aircc.py: error: aie-opt failed with exit status 1`
_WRAPPER = re.compile(r"failed with exit status|returned non-zero exit status|exited with (status|code)")


def error_excerpt(lines: list[str]) -> str:
    """The one line of a failed run's last lines that says what failed: the last line that reads as an error
    and is neither make's own bookkeeping (`Leaving directory`, `*** [...] Error 1`) nor a driver's wrapper
    (`... failed with exit status 1`); else the last error line, the last line that is not make's, the last line
    ("" for none)."""
    own = [ln for ln in lines if ln.strip() and not _MAKE_LINE.match(ln)]
    errors = [ln for ln in own if _ERROR_WORD.search(ln)]
    root = [ln for ln in errors if not _WRAPPER.search(ln)]
    return (root or errors or own or [ln for ln in lines if ln.strip()] or [""])[-1].strip()


_TRACEBACK = "Traceback (most recent call last):"
_CARETS = re.compile(r"^[\s^~]+$")  # the ^^^^ / ~~~~ a 3.11+ traceback marks an expression with
TAIL_LINES, TAIL_WIDTH = 4, 200  # what `failure_tail` quotes: at most 4 lines of at most 200 characters


def _printable(line: str) -> str:
    """A line as one terminal line may show it: what a terminal would act on written as its Python escape."""
    line = line if line.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    return line if len(line) <= TAIL_WIDTH else line[: TAIL_WIDTH - 3] + "..."


def failure_tail(text: str) -> str:
    """What a failed run printed last, on one line: the last TAIL_LINES lines of its last Python traceback (the
    innermost frame and the exception, caret marks and make's own lines left out) joined with ` | `, each cut to
    TAIL_WIDTH characters and escaped; without a traceback, `error_excerpt`'s line. "" for an empty text."""
    lines = [ln for ln in clean_lines(text) if ln and not _MAKE_LINE.match(ln)]
    starts = [i for i, ln in enumerate(lines) if ln == _TRACEBACK]
    if not starts:
        return _printable(error_excerpt(clean_lines(text)))
    frames = [ln for ln in lines[starts[-1] + 1:] if not _CARETS.match(ln)]
    return " | ".join(_printable(ln) for ln in frames[-TAIL_LINES:])
