"""Print registry.names' CONFUSABLE_PROTOTYPES from Unicode's confusables.txt (UTS #39 data): the mappings whose
source is printable, lies in Latin / IPA / Greek / Cyrillic (below U+0530) or is a dash, and whose prototype is ASCII
letters, digits or '-', less those NFKC + casefold already make equal. Usage:
python scripts/confusables_subset.py confusables.txt   (https://www.unicode.org/Public/security/latest/)"""

from __future__ import annotations

import sys
import unicodedata

DASHES = range(0x2010, 0x2016), (0x2043, 0x2212, 0x2796, 0xFE58)


def subset(lines) -> list[tuple[int, str]]:
    out = []
    for line in lines:
        fields = [f.strip() for f in line.split("#")[0].split(";")]
        if len(fields) < 2 or not fields[0]:
            continue
        source, target = int(fields[0], 16), "".join(chr(int(c, 16)) for c in fields[1].split())
        char = chr(source)
        if not (source < 0x0530 or source in DASHES[0] or source in DASHES[1]) or not char.isprintable():
            continue
        if not all(c.isascii() and (c.isalnum() or c == "-") for c in target):
            continue
        if unicodedata.normalize("NFKC", char).casefold() == target.casefold():
            continue
        out.append((source, target))
    return sorted(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8-sig") as f:
        rows = subset(f)
    print(" ".join(f"{s:04X}:{t}" for s, t in rows))
