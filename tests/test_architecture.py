"""The dependency direction is a rule of the project (ARCHITECTURE.md draws it): checker and impl import
nothing of ours, spec imports only checker's model contract (and its symbolic twin), serve imports only impl,
conformance joins spec, checker and impl, audit (real brokers) stands on conformance, cli may import
everything and nothing imports cli. And no import
cycles among txnspec's modules, counting imports inside functions too (a lazy import that closes a cycle is
still a cycle: the two modules cannot be understood apart). And one concern per module: a module over 400 lines
says why in its docstring ("Long because ...")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "checker", "impl", "serve", "conformance", "audit", "cli")

# package -> the packages of ours it may import (modules of checker allowed to spec are listed below)
ALLOWED = {
    "checker": set(),
    "impl": set(),
    "spec": {"checker"},
    "serve": {"impl"},
    "conformance": {"spec", "checker", "impl"},
    "audit": {"spec", "checker", "impl", "conformance"},
    "cli": {"spec", "checker", "impl", "serve", "conformance", "audit"},
}
SPEC_MAY_IMPORT_FROM_CHECKER = ("txnspec.checker.model", "txnspec.checker.symbolic")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def our_package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "txnspec" and len(parts) > 1 and parts[1] in PACKAGES:
        return parts[1]
    if parts[0] in PACKAGES:
        return parts[0]  # a bare `import spec` is a mistake too
    return None


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            target = our_package(module)
            if target is None or target == package:
                continue
            if target not in ALLOWED[package]:
                found.append(f"{path.relative_to(ROOT)} imports {module}")
            elif package == "spec" and not module.startswith(SPEC_MAY_IMPORT_FROM_CHECKER):
                found.append(f"{path.relative_to(ROOT)} imports {module} (spec may use only checker.model)")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_dependency_direction(package: str) -> None:
    assert violations(package) == []


def test_the_rule_detects_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from txnspec.spec.coordinator import handle_end_txn\nimport txnspec.impl\n")
    modules = imported_modules(bad)
    assert [our_package(m) for m in modules if our_package(m)] == ["spec", "spec", "impl"]


# --- import cycles ---------------------------------------------------------------------------------------------

def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "txnspec." + ".".join(parts)


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the txnspec modules it imports (``from a.b import c`` counts a.b, and a.b.c if it is a module)."""
    files = {module_name(path, root): path for package in packages for path in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for name in names:
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100  # every module was found
    assert cycles(graph) == []


def test_the_cycle_rule_detects_a_lazy_import_cycle(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "a.py").write_text("from txnspec.spec.b import f\n")
    (tmp_path / "spec" / "b.py").write_text("def f():\n    from txnspec.spec import a\n")
    (tmp_path / "spec" / "c.py").write_text("from . import a\n")
    graph = import_graph(tmp_path, ("spec",))
    assert graph["txnspec.spec.c"] == {"txnspec.spec.a"}
    assert cycles(graph) == [["txnspec.spec.a", "txnspec.spec.b"]]


# --- the picture and the links -------------------------------------------------------------------------------

def drawn_arrows(text: str) -> dict[str, set[str]]:
    """The imports ARCHITECTURE.md's Mermaid picture allows: ``a --> b`` (with or without a label)."""
    import re

    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    arrows: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for source, target in re.findall(r"^\s*(\w+)\s*-->(?:\|[^|]*\|)?\s*(\w+)\s*$", block, re.MULTILINE):
        arrows[source].add(target)
    return arrows


def test_the_picture_draws_exactly_the_allowed_imports() -> None:
    assert drawn_arrows((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")) == ALLOWED


def test_the_picture_rule_sees_a_missing_arrow() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").replace("serve --> impl", "")
    assert drawn_arrows(text) != ALLOWED


# a parent-directory step ("../", not an ellipsis such as "core/.../transaction") or the workplace's shared folder
OUTSIDE = re.compile(r"(?<!\.)\.\./|shared/")


def test_no_document_links_outside_the_repository() -> None:
    documents = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    outside = [f"{d.relative_to(ROOT)}:{n}" for d in documents
               for n, line in enumerate(d.read_text(encoding="utf-8").splitlines(), 1)
               if OUTSIDE.search(line)]
    assert outside == []


# --- one concern per module (issue 28) -------------------------------------------------------------------------

LONG = 400  # lines; a module longer than this says why in its docstring ("Long because ...")


def unexplained_long_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Modules over ``LONG`` lines whose docstring gives no reason ("Long because ...") for their length."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            name = path.relative_to(root).as_posix()
            if text.count("\n") <= LONG:
                continue
            doc = ast.get_docstring(ast.parse(text, filename=str(path))) or ""
            if "Long because " not in doc:
                found.append(f"{name} ({text.count(chr(10))} lines)")
    return found


def test_a_long_module_says_why() -> None:
    assert unexplained_long_modules() == []


def test_the_length_rule_sees_a_long_module_without_a_reason(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    body = "x = 1\n" * LONG
    (tmp_path / "spec" / "long.py").write_text(f'"""A module."""\n{body}')
    (tmp_path / "spec" / "explained.py").write_text(f'"""A module.\n\nLong because it must be."""\n{body}')
    (tmp_path / "spec" / "short.py").write_text('"""A module."""\nx = 1\n')
    assert unexplained_long_modules(tmp_path, ("spec",)) == [f"spec/long.py ({LONG + 1} lines)"]
