"""The wheel a user installs: built from this tree, installed without the source tree, it migrates, remembers,
recalls and loads its Dagster definitions from packaged files alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.cases import REPO

INSTALLED_CHECK = textwrap.dedent("""
    import json, sys
    target, repo, url = sys.argv[1:4]
    sys.path[:] = [target] + [p for p in sys.path if p and p.rstrip('/') != repo]  # the editable install's entry
    import memory_assets
    from memory_assets import database
    from memory_assets.definitions import defs
    assert memory_assets.__file__.startswith(target), memory_assets.__file__
    with memory_assets.connect(url) as mem:
        remembered = mem.remember(project="wheel", kind="env", type="semantic", title="Staging needs TLS",
                                  body="Staging PostgreSQL requires sslmode=require because the proxy refuses TCP.")
        hits = mem.recall("wheel", "what does staging require for TLS?", k=3)
    definitions = defs()
    print(json.dumps({"token": remembered.token, "hits": [h.token for h in hits], "mode": hits.mode,
                      "migrations": len(database.migration_files()), "functions": len(database.function_files()),
                      "queries": len(database.query_names()),
                      "assets": sorted(key.to_user_string() for key in definitions.resolve_all_asset_keys())}))
""")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The project built as a wheel and installed into a bare target folder (no dependencies, no source tree)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # a clean copy: setuptools' build/ folder in a working tree keeps deleted modules
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".memory_assets", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(root / "dist"), str(source)], check=True, cwd=root)
    wheel = next((root / "dist").glob("memory_assets-*.whl"))
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, cwd=root)
    return target


def test_the_wheel_installs_no_generic_top_level_name(installed):
    """Only the memory_assets package (and its metadata and script) lands in site-packages: no `resources`, no `sql`."""
    top_level = {p.name for p in installed.iterdir() if not p.name.endswith((".dist-info", ".data"))} - {"bin"}
    assert top_level == {"memory_assets"}
    packaged = {p.relative_to(installed / "memory_assets").as_posix() for p in (installed / "memory_assets").rglob("*")}
    assert {"resources/postgres.py", "sql/001_ledger.sql", "sql/018_fold_functions.sql", "sql/queries/ledger/fold.sql",
            "sql/functions/memory_fold.sql", "dg.toml", "demo/demo_units.jsonl", "py.typed"} <= packaged
    source = {p.relative_to(REPO / "memory_assets").as_posix() for p in (REPO / "memory_assets").rglob("*.py")
              if "__pycache__" not in p.parts}
    source |= {f"resources/{p.name}" for p in (REPO / "resources").glob("*.py")}
    assert source <= packaged, sorted(source - packaged)  # every module and resource is shipped


def test_the_installed_wheel_migrates_remembers_recalls_and_loads_its_definitions(installed, clean, tmp_path):
    """Run from another folder with the source tree off the path: everything comes from the installed files."""
    result = subprocess.run([sys.executable, "-c", INSTALLED_CHECK, str(installed), str(REPO), clean],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["token"] == "mem-1" and report["hits"][0] == "mem-1"
    assert report["migrations"] == len(list((REPO / "sql").glob("0*.sql")))
    assert report["functions"] == len(list((REPO / "sql" / "functions").glob("*.sql")))
    assert report["queries"] == len([p for p in (REPO / "sql" / "queries").rglob("*.sql")
                                     if not p.name.startswith("_")])
    assert "ledger_units" in report["assets"] and "unit_embeddings" in report["assets"]


def test_the_installed_command_line_runs(installed, tmp_path):
    """The console entry point's module runs from the installed package."""
    code = ("import sys, runpy; "
            "sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p and p.rstrip('/') != sys.argv[2]]; "
            "sys.argv = ['memory-assets', '--help']; runpy.run_module('memory_assets.cli', run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", code, str(installed), str(REPO)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "recall" in result.stdout and "remember" in result.stdout
