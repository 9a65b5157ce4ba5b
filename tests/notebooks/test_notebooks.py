"""The analysts' notebooks execute against a seeded database."""

from datetime import UTC, datetime

import nbformat
import pytest
from nbclient import NotebookClient

from memory_assets.cli.operate import DEMO_FILE
from memory_assets.defs import runner
from tests.cases import REPO


@pytest.fixture
def seeded(mem, conn):
    """The demo corpus through the write path and the whole graph, plus some usage events."""
    from click.testing import CliRunner

    from memory_assets.cli import main

    assert CliRunner().invoke(main, ["import", str(DEMO_FILE), "--no-fold"]).exit_code == 0
    assert all(r.success for r in runner.materialize_day(datetime.now(UTC).date(),
                                                         runner.dagster_instance(mem.url)))
    for i in range(6):
        mem.prompt_block("acme", task_id=f"T-{i}")
        mem.cite_from_text("acme", f"T-{i}", "per mem-3")
    assert all(r.success for r in runner.materialize_day(datetime.now(UTC).date(),
                                                         runner.dagster_instance(mem.url)))
    return mem


@pytest.mark.parametrize("name", ["read_rate.ipynb", "memory_health.ipynb"])
def test_notebook_executes_against_the_seeded_database(seeded, name):
    path = REPO / "notebooks" / name
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), "commit without outputs"
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
