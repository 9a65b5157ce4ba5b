"""The structure the issue promises, checked: one direction of imports, SQL in sql/, statuses from the vocabulary."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory_assets import database
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.gates import Candidate

REPO = Path(__file__).resolve().parents[2]
PACKAGE_FILES = sorted(p for p in (REPO / "memory_assets").rglob("*.py") if "__pycache__" not in p.parts)
# the application's code (tests keep their own probing SQL next to what they assert)
CODE_FILES = PACKAGE_FILES + sorted((REPO / "bench").glob("*.py"))
SQL_WORDS = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE|ALTER|WHERE|RETURNING|GROUP BY|ORDER BY)\b")
QUOTED_VALUES = re.compile("'(" + "|".join(V.STATUSES + V.VISIBILITIES) + ")'")


def literal_text(node: ast.AST) -> str | None:
    """The text of a string literal or f-string (its constant parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def string_literals(path: Path) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of every string literal in a module, docstrings excluded."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        text = literal_text(node)
        if text is not None and id(node) not in docstrings:
            found.append((node.lineno, node.end_lineno or node.lineno, text))
    return found


def test_imports_run_one_way_and_have_no_cycles():
    """import-linter's contracts (pyproject.toml): interfaces -> Dagster layer -> API -> domain -> database."""
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_contracts_catch_a_domain_module_that_imports_the_dagster_layer(tmp_path):
    """The layers contract is not vacuous: a copy of the package with one upward import fails it."""
    copy = tmp_path / "memory_assets"
    subprocess.run(["cp", "-rL", str(REPO / "memory_assets"), str(copy)], check=True)
    (copy / "bundle.py").write_text((copy / "bundle.py").read_text() + "\nfrom memory_assets.defs import runner\n")
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=tmp_path,
                            capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin"})
    assert result.returncode != 0 and "memory_assets.bundle -> memory_assets.defs.runner" in result.stdout


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_function_level_import_of_the_package(path):
    """Imports of memory_assets live at module level: none is hidden in a function to dodge a cycle."""
    tree = ast.parse(path.read_text(), str(path))
    hidden = [f"line {inner.lineno}" for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for inner in ast.walk(node)
              if (isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("memory_assets"))
              or (isinstance(inner, ast.Import) and any(a.name.startswith("memory_assets") for a in inner.names))]
    assert not hidden, hidden


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_multi_line_sql_outside_sql_folder(path):
    """A statement longer than one line is a named file under sql/queries/<domain>/, loaded by name."""
    inline = [f"lines {first}-{last}" for first, last, text in string_literals(path)
              if last > first and SQL_WORDS.search(text)]
    assert not inline, inline


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_status_or_visibility_quoted_by_hand(path):
    """Statuses and visibilities in SQL come from the vocabulary (parameters or {placeholders}), never typed."""
    quoted = [f"line {first}: {match.group(0)}" for first, _, text in string_literals(path)
              for match in QUOTED_VALUES.finditer(text)]
    assert not quoted, quoted


def test_the_scans_see_what_they_forbid():
    """The scanners are not vacuous: a literal with each forbidden shape is found."""
    sample = REPO / "tests" / "architecture" / "forbidden_shapes.txt"
    literals = string_literals(sample)
    assert any(last > first and SQL_WORDS.search(text) for first, last, text in literals)
    assert any(QUOTED_VALUES.search(text) for _, _, text in literals)


def test_one_field_list_defines_a_candidate():
    """The API's remember, the Candidate the gates build and the inbox columns all derive from the vocabulary."""
    remember = list(inspect.signature(Memory.remember).parameters)[1:]
    assert set(remember) == set(V.CANDIDATE_FIELDS) | {"supersedes"}
    assert {f.name for f in dataclasses.fields(Candidate)} == set(V.CANDIDATE_FIELDS)
    assert set(V.PROVENANCE_FIELDS) <= set(V.INBOX_COLUMNS)
    assert database.SPELLINGS["provenance_columns"] == ", ".join(V.PROVENANCE_FIELDS)
