"""The dependency direction is a rule of the project: checker imports nothing of ours, impl imports
neither spec nor checker, spec imports only checker's model contract (and its symbolic twin)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "checker", "impl", "conformance")

# package -> the packages of ours it may import (modules of checker allowed to spec are listed below)
ALLOWED = {
    "checker": set(),
    "impl": set(),
    "spec": {"checker"},
    "conformance": {"spec", "checker", "impl", "conformance"},
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
