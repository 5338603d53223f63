"""The layout promises: the phase gates reach whole models only through the backend seam; the product's imports
have no cycle, point one way and take no private name across modules; no function is over 80 lines (modules are as
long as their concern), no class name is defined twice, no product file cites a file outside the repository, and
the environment is read in one module (npu_kernels.settings)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Phase 0 checks the weight files (npu_kernels.model.weights) and runs the HF reference, which it takes from the seam
FORBIDDEN = ("npu_kernels.model.pipeline", "npu_kernels.model.hf_reference", "npu_kernels.numerics.executors.emulated",
             "npu_kernels.numerics.executors.torch_exec", "npu_kernels.numerics.executors.base", "npu_kernels.mlir_air.executor")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_phase_gates_import_no_pipeline_reference_or_executor_class():
    offenders = {}
    for path in sorted((ROOT / "handlers" / "gates").glob("*.py")):
        bad = sorted(m for m in _imports(path) if m.startswith(FORBIDDEN))
        if bad:
            offenders[path.name] = bad
    assert not offenders, offenders


def test_the_old_flat_kernel_modules_are_gone():
    for old in ("modelconfig", "architecture", "weights", "pipeline", "hf_reference", "smollm2", "prompts", "plan",
                "runner", "gates", "harness"):
        assert not (ROOT / "npu_kernels" / f"{old}.py").exists(), old
    assert not (ROOT / "npu_kernels" / "executors").exists() and not (ROOT / "npu_kernels" / "model" / "backend.py").exists()
    for old in ("bf16", "catalog", "compare", "tiles", "run", "evidence", "harness_inputs"):  # npu_kernels.numerics now
        assert not (ROOT / "npu_kernels" / f"{old}.py").exists(), old


# --- the import graph of the product ---------------------------------------------------------------------------

PRODUCT = ("statemachine", "handlers", "ledger", "npu_kernels", "registry")

# The written direction (docs/design.md, "Layout: the rooms"): each room may import only rooms at its own level or below. A module
# belongs to the longest room name that prefixes it (npu_kernels.mlir_air.twin is its own room, above
# npu_kernels.backends, while the rest of npu_kernels.mlir_air is below it).
LEVELS: tuple[str, ...] = (
    "npu_kernels.settings",        # the one module that reads the environment: imports nothing of the product
    "npu_kernels.thresholds",      # every number a verdict is judged against: imports nothing of the product
    "npu_kernels.provenance",      # where a figure comes from: the closed vocabulary (imports nothing of the product)
    "npu_kernels.inconclusive",    # a device run with no verdict either way (an exception): imports nothing of the product
    "npu_kernels.numerics",        # leaf kernels: catalog, bf16, comparators, tiles, run_kernel, the executors
    "npu_kernels.model",           # config, architecture, weights, the decoder pipeline, HF reference, prompts, plan
    "npu_kernels.perf",            # the NPU2 performance model (and the physical-plausibility checks of evidence)
    "npu_kernels.mlir_air",        # mlir-air's formats and commands, the harness executor, walk, scaffold
    "npu_kernels.toolchain",       # what produced a figure: versions of executors, perf model, mlir-air checkout
    "npu_kernels.backends",        # the ModelBackend and KernelRunner seams over all of the above (runners record toolchains)
    "npu_kernels.mlir_air.twin",   # the stand-in checkout: it runs the in-process backend behind mlir-air's commands
    "npu_kernels",             # the package itself (docstring only)
    "ledger",
    "statemachine",
    "registry",
    "handlers",
)
ALLOWED_CYCLES: tuple[frozenset[str], ...] = ()


def _level(module: str) -> int:
    best = max((room for room in LEVELS if module == room or module.startswith(room + ".")), key=len)
    return LEVELS.index(best)


def _product_modules() -> dict[str, Path]:
    modules = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _product_modules()


def _owner(name: str) -> str | None:
    """The product module `name` (a module, or a name inside one) lives in: its longest module prefix."""
    parts = name.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) or None


def _imported(module: str, node: ast.AST) -> list[tuple[str, str | None]]:
    """(product module imported, the name taken from it or None) for one import statement."""
    if isinstance(node, ast.Import):
        return [(owner, None) for alias in node.names if (owner := _owner(alias.name))]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    out = []
    for alias in node.names:
        owner = _owner(f"{base}.{alias.name}")
        if owner == f"{base}.{alias.name}":
            out.append((owner, None))  # `from package import module`
        elif owner:
            out.append((owner, alias.name))
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the product modules it imports, at module level or inside a function, plus the packages
    whose __init__ each such import runs first (those of other packages than its own)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            for target, _ in _imported(module, node):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in MODULES and step != module and not module.startswith(step + "."):
                        edges.add(step)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _path(graph: dict[str, set[str]], component: frozenset[str]) -> str:
    """One cycle through the component, as `a -> b -> a`, for the failure message."""
    start = min(component)
    seen, trail = {start: None}, [start]
    while trail:
        node = trail.pop(0)
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                chain, at = [start], node
                while at is not None:
                    chain.append(at)
                    at = seen[at]
                return " -> ".join(reversed(chain))
            if nxt not in seen:
                seen[nxt] = node
                trail.append(nxt)
    return ", ".join(sorted(component))


def test_the_product_has_no_import_cycle_at_module_or_function_level():
    graph = _graph()
    assert len(graph) > 100 and graph["handlers.deploy"]  # the walk found the product
    cycles = _cycles(graph)
    unexpected = [_path(graph, c) for c in cycles if c not in ALLOWED_CYCLES]
    assert not unexpected, "import cycles:\n" + "\n".join(unexpected)
    gone = [sorted(c) for c in ALLOWED_CYCLES if c not in cycles]
    assert not gone, f"allow-listed cycles that no longer exist (remove them from ALLOWED_CYCLES): {gone}"


def test_every_import_points_down_the_written_direction():
    graph = _graph()
    against = sorted(f"{m} ({LEVELS[_level(m)]}) imports {t} ({LEVELS[_level(t)]})"
                     for m, targets in graph.items() for t in targets if _level(t) > _level(m))
    assert not against, "imports against the direction of LEVELS:\n" + "\n".join(against)


def test_the_direction_check_sees_the_twin_as_its_own_room():
    assert _level("npu_kernels.mlir_air.twin.harness") > _level("npu_kernels.backends.in_process") > _level("npu_kernels.mlir_air.executor")
    assert _level("npu_kernels.numerics.executors.emulated") < _level("npu_kernels.model.pipeline")


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]
    assert _path(graph, frozenset({"a", "b", "c"})) == "a -> b -> c -> a"
    node = ast.parse("def f():\n    from handlers.deploy import advance\n").body[0].body[0]
    assert _imported("registry.fold", node) == [("handlers.deploy", "advance")]


def _private_uses(module: str, tree: ast.AST) -> list[str]:
    """`from x import _y` of another product module, and `m._y` on a product module bound by an import."""
    found, bound = [], {}
    for node in ast.walk(tree):
        for target, name in _imported(module, node):
            if target != module and name and name.startswith("_") and not name.startswith("__"):
                found.append(f"{module}:{node.lineno}: from {target} import {name}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                if full in MODULES and full != module:
                    bound[alias.asname or (alias.name if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0])] = full
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{module}:{node.lineno}: {bound[node.value.id]}.{node.attr}")
    return found


def test_no_product_module_uses_another_modules_private_names():
    found = [use for module, path in MODULES.items() for use in _private_uses(module, ast.parse(path.read_text()))]
    assert not found, "\n".join(found)


def test_the_private_name_check_sees_both_spellings():
    tree = ast.parse("from handlers.deploy import _now\nfrom handlers import deploy\ndeploy._judge()\n")
    assert _private_uses("handlers.workers.coordinator", tree) == [
        "handlers.workers.coordinator:1: from handlers.deploy import _now",
        "handlers.workers.coordinator:3: handlers.deploy._judge",
    ]


# --- function size, names, citations, the environment --------------------------------------------------------------

MAX_FUNCTION_LINES = 80  # modules are as long as their concern needs; a function says one thing
# functions that are a declarative table (data written as code), each with what it holds
DECLARATIVE: dict[str, str] = {
    "registry.synthetic:realistic_deployment": "the events of one realistic deployment, listed",
    "npu_kernels.mlir_air.twin.harness:_parser": "the flags of mlir-air's harness scripts, declared",
    "npu_kernels.mlir_air.scaffold:_makefile": "the scaffolded Makefile's text",
}


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_product_function_is_over_80_lines():
    long = sorted(f"{module}:{node.name} ({MODULES[module].relative_to(ROOT)}:{node.lineno}): "
                  f"{node.end_lineno - node.lineno + 1} lines"
                  for module, path in MODULES.items() for node in _functions(ast.parse(path.read_text()))
                  if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES and f"{module}:{node.name}" not in DECLARATIVE)
    assert not long, f"product functions over {MAX_FUNCTION_LINES} lines (split them where the work splits):\n" + "\n".join(long)
    found = {f"{module}:{node.name}" for module, path in MODULES.items() for node in _functions(ast.parse(path.read_text()))}
    assert set(DECLARATIVE) <= found, f"DECLARATIVE names functions that are gone: {sorted(set(DECLARATIVE) - found)}"


def test_no_class_name_is_defined_in_two_product_modules():
    where: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, f"one name, one class (rename one of each):\n{twice}"


# files outside the repository that product code once cited; and paths of a machine
OUTSIDE = re.compile(r"\b(NUMERICS|STYLE|DESIGN)\.md\b|/work/|/root/|/home/\w|\.\./shared/")


def test_no_product_file_cites_a_file_outside_the_repository():
    files = [*MODULES.values(), *sorted((ROOT / "npu_kernels").rglob("*.toml")), *sorted((ROOT / "handlers").rglob("*.toml")),
             ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile",
             *sorted((ROOT / "scripts").glob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py"))]
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for path in files
            for i, line in enumerate(path.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, "cite the repository's own docs/ instead:\n" + "\n".join(hits)
    cited = {m.group(0) for path in files for m in re.finditer(r"(?<![\w/.<>-])docs/[\w.-]+\.(?:md|png)\b", path.read_text())}
    from registry.model_docs import DOC_FILES  # what the tool writes under llms/<model>/: projections, not citations

    missing = sorted(c for c in cited if not (ROOT / c).exists() and c not in DOC_FILES)
    assert not missing, f"documents the code cites that the repository lacks: {missing}"


ENVIRONMENT_READERS = {"npu_kernels.settings"}  # the one module that reads the environment (and the process's own)


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in ("environ", "getenv", "putenv"):
            return True
    return False


def test_the_environment_is_read_in_one_place():
    readers = sorted(module for module, path in MODULES.items() if _reads_environment(ast.parse(path.read_text())))
    assert set(readers) <= ENVIRONMENT_READERS, f"read it through npu_kernels.settings: {sorted(set(readers) - ENVIRONMENT_READERS)}"


# --- no handler asks which executor it holds ---------------------------------------------------------------------

# every name an executor goes by (npu_kernels.backends.kernel_runners: EXECUTOR_NAMES, WORKER_EXECUTORS): a handler that
# compares one, or keys a table by one, is choosing an implementation, which only the two factories may do
EXECUTOR_NAMES = frozenset({"emulated", "torch", "fp32", "mlir-air", "sleep"})


def _names_an_executor(node: ast.AST) -> bool:
    """A string constant that is an executor name, or a tuple / list / set literal holding one (`x in (...)`)."""
    if isinstance(node, ast.Constant):
        return node.value in EXECUTOR_NAMES
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_an_executor(e) for e in node.elts)


def _executor_branches(module: str, tree: ast.AST) -> list[str]:
    """`x == "mlir-air"` (any comparison with an executor name on either side) and `{"mlir-air": ...}`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_names_an_executor(side) for side in (node.left, *node.comparators)):
            found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(k is not None and _names_an_executor(k) for k in node.keys):
            found.append(f"{module}:{node.lineno}: a dict keyed by an executor name")
    return found


def test_no_handler_branches_on_an_executor_name():
    found = [hit for module, path in MODULES.items() if module.split(".")[0] == "handlers"
             for hit in _executor_branches(module, ast.parse(path.read_text()))]
    assert not found, "ask the runner or the backend instead (runner.takes_npu_lock, backend.hardware, ...):\n" + \
        "\n".join(found)


def test_the_executor_branch_check_sees_comparisons_and_tables_but_not_a_keyword():
    tree = ast.parse('if state.executor == "mlir-air":\n    pass\n'
                     'hw = "torch" != name\n'
                     'ok = executor in ("emulated", "fp32")\n'
                     'source = {"emulated": "emulated", "mlir-air": "harness"}.get(executor)\n'
                     'make(executor="mlir-air", default="emulated")\n'
                     'same = a == b and kind == "harness"\n')
    assert _executor_branches("handlers.x", tree) == [
        "handlers.x:1: state.executor == 'mlir-air'",
        "handlers.x:3: 'torch' != name",
        "handlers.x:4: executor in ('emulated', 'fp32')",
        "handlers.x:5: a dict keyed by an executor name",
    ]


def test_no_package_of_the_product_shadows_an_installed_distributions_module():
    """A top-level name of ours that another installed distribution also ships hides that distribution's module
    from every importer on this path: transformers 5.25 requires Hugging Face's `kernels`, and the product's old
    top-level `kernels` package answered transformers' `from kernels import ...` (CI, 2026-12-03)."""
    claimed = importlib.metadata.packages_distributions()
    ours = {"npu-ledger", "npu_ledger"}
    clashes = {name: sorted(set(claimed[name]) - ours) for name in PRODUCT if set(claimed.get(name, ())) - ours}
    assert not clashes, f"top-level package(s) also shipped by another installed distribution: {clashes}"
