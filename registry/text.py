"""Small, deterministic text helpers shared by the markdown projections (tables and number formats)."""

from __future__ import annotations

import math
import shlex
from typing import Any, Iterable, Sequence

DASH = "—"


def cell(value: Any) -> str:
    """One table cell: None -> em dash, pipes escaped, newlines flattened."""
    if value is None or value == "":
        return DASH
    text = value if isinstance(value, str) else str(value)
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def shown(text: str) -> str:
    """A name as a terminal line may show it: as it is when every character is printable, else Python's repr
    (newlines, control and invisible format characters escaped, in quotes), so it cannot forge a line."""
    return text if text.isprintable() else repr(text)


def escaped(text: str) -> str:
    """Free text (a lesson, a note, a reason) as a terminal line may show it: every character a terminal would
    act on or hide (control, escape, format, line separator: `str.isprintable` false) written as its Python
    escape (`\\x1b`, `\\n`, `\\u202e`), the rest as it is; so an OSC or CSI sequence is shown, never run."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def ledger_command(verb: str, name: str, *options: str) -> str:
    """`ledger VERB NAME OPTIONS...` as a person can paste it: the name `shlex.quote`d, and after `--` (options
    first) when it starts with `-`, so `--help` is a name, not an option; `options` are this tool's own text.
    A name an older ledger holds with a control character is shown escaped (`shown`), never raw."""
    quoted = shlex.quote(name)
    if not quoted.isprintable():
        quoted = shown(name)
    if name.startswith("-"):
        return " ".join(["ledger", verb, *options, "--", quoted])
    return " ".join(["ledger", verb, quoted, *options])


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def sci(x: float | None, digits: int = 2) -> str | None:
    """`9.31e-3` style (trailing zeros and exponent padding dropped); non-finite values spelled out; None stays None."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def num(x: float | None) -> str | None:
    """Throughput-style number: integers above 100, three significant figures below."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return sci(x)
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def fixed(x: float | None, places: int = 4) -> str | None:
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return sci(x)
    return f"{x:.{places}f}"


def plain(value: Any) -> Any:
    """JSON-friendly number: integral floats become ints (upstream writes `8508`, not `8508.0`)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def shape_text(shape: Sequence[tuple[str, Any]], sep: str = "×") -> str:
    """`2048×576×576` for up to three integer dims (GEMM, GEMV, norms), else `lq=..,lk=..` (self-describing)."""
    if len(shape) <= 3 and all(isinstance(v, int) and not isinstance(v, bool) for _, v in shape):
        return sep.join(_scalar(v) for _, v in shape)
    return shape_args(shape)


def shape_args(shape: Sequence[tuple[str, Any]]) -> str:
    return ",".join(f"{k}={_scalar(v)}" for k, v in shape)


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return "x".join(_scalar(x) for x in v)
    return str(v)


def scalar(v: Any) -> str:
    return _scalar(v)
