"""The MCP resources: the projections as an agent reads them -- the kernel registry (markdown and GEMM JSON)
and each deployment's docs (TODO.md, the development-progress pages, the evaluation report).

Each is rebuilt from the ledger when listed or read (`registry.projections`: a pure function of the events),
so it is what `ledger registry build` would write now, whatever the files on disk say. Charts (PNG) are left
out. URIs: `ledger://projections/<path under the workspace>`, the path percent-encoded.

Imports: handlers.bootstrap, registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from handlers.bootstrap import App
from registry.projections import REGISTRY_DIR, project_all

SCHEME = "ledger://projections/"
MIME = {".md": "text/markdown", ".json": "application/json"}


@dataclass(frozen=True)
class Page:
    uri: str
    path: str  # under the workspace, "/"-separated
    mime_type: str
    description: str


def _mime(path: str) -> str | None:
    return next((mime for ext, mime in MIME.items() if path.endswith(ext)), None)


def describe(path: str) -> str:
    """What the projected file at `path` is, in a few words."""
    if path.startswith(f"{REGISTRY_DIR}/"):
        return f"kernel registry: {path[len(REGISTRY_DIR) + 1:]}"
    model, _, rest = path.removeprefix("llms/").partition("/")
    if rest == "docs/evaluation_report.md":
        return f"{model}: the independent evaluation report (Phase 7)"
    return f"{model}: {rest}"


def uri_of(path: str) -> str:
    return SCHEME + quote(path)


def texts(app: App) -> dict[str, bytes]:
    """Every text projection (markdown, JSON) of the ledger, by path, from a read-only ledger."""
    app.read_only = True
    return {path: data for path, data in project_all(app.ledger.all_events()).items() if _mime(path)}


def pages(app: App) -> list[Page]:
    return [Page(uri_of(p), p, _mime(p), describe(p)) for p in texts(app)]


def read(app: App, uri: str) -> tuple[str, str]:
    """(text, mime type) of the resource `uri`; KeyError naming what exists when there is none."""
    path = unquote(uri[len(SCHEME):]) if uri.startswith(SCHEME) else None
    files = texts(app)
    if path not in files:
        raise KeyError(f"no projection {uri!r}: resources are {SCHEME}<path>, e.g. "
                       f"{uri_of(next(iter(files)))}" if files else f"no projection {uri!r}: the ledger has none yet")
    return files[path].decode("utf-8"), _mime(path)
