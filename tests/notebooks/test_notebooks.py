"""The analysts' notebooks execute against a seeded database, through a connection that cannot write."""

from datetime import UTC, datetime

import nbformat
import pytest
from nbclient import NotebookClient

from memory_assets.cli.operate import DEMO_FILE
from memory_assets.defs import runner
from tests.cases import REPO

CANNOT_WRITE = """
import psycopg
refused = 0
for sql in ("INSERT INTO memory_switch VALUES ('kill', '', 'on')", "UPDATE memory_units SET status = 'retired'",
            "DELETE FROM memory_events"):
    try:
        conn.execute(sql)
    except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege):
        refused += 1
print(conn.execute("SELECT current_user").fetchone()[0], "refused", refused, "writes")
"""


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
    # before the notebook closes its connection: prove that it is the read-only one, which no write gets through
    notebook.cells.insert(len(notebook.cells) - 1, nbformat.v4.new_code_cell(CANNOT_WRITE))
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
    assert "memory_reader refused 3 writes" in "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    with seeded.connection() as conn:
        assert conn.execute("SELECT count(*) FROM memory_switch").fetchone()[0] == 0
