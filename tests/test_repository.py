"""Rules of the repository that a reviewer would otherwise check by hand."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ["actors", "transport", "zkstub", "kcore", "bench"]  # each may import only leftwards


def _imported_top_level_names(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", LAYERS)
def test_no_package_imports_a_higher_layer(package):
    higher = set(LAYERS[LAYERS.index(package) + 1 :])
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_top_level_names(path) & higher
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert offenders == []


def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--quiet", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_is_formatted():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--quiet", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "exec ./dev test\n" in ci
    assert "./dev test" in readme and "./dev demo" in readme
