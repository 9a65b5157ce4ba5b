"""The analysts' lab: `memory-assets lab` (what `make lab` runs) serves the notebooks on the project's kernel, and
both notebooks execute on seeded data through a connection that cannot write, rendering plots from the tables the
assets materialise and the arm comparison of read_rate.ipynb."""

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from nbclient import NotebookClient

from memory_assets import analytics, decay
from memory_assets import vocabulary as V
from memory_assets.cli import main
from memory_assets.cli.operate import DEMO_FILE
from tests.cases import REPO

NOTEBOOKS = REPO / "notebooks"
TASKS = 90  # with the holdout at 50 %, each arm gets more than ARM_MIN_TASKS of them (the draw is a stable hash)

# Inserted before a notebook's last cell (which closes `conn`): even with the read-only default turned off and the
# role reset, the notebook's connection is memory_reader's own session and every write is refused by privilege.
CANNOT_WRITE = """
import psycopg
conn.execute("SET default_transaction_read_only = off")
conn.execute("RESET ROLE")
refused = 0
for sql in ("INSERT INTO memory_switch VALUES ('kill', '', 'on')", "UPDATE memory_units SET status = 'retired'",
            "DELETE FROM memory_events", "DELETE FROM read_rate_arms"):
    try:
        conn.execute(sql)
    except psycopg.errors.InsufficientPrivilege:
        refused += 1
print(conn.execute("SELECT session_user").fetchone()[0], "refused", refused, "writes")
"""


def seed(mem, today) -> dict[str, int]:
    """The demo corpus through the write path, a 50 % holdout over TASKS tasks (prompt blocks inject for the arm with
    memory on; most of those tasks cite a unit, a few held-out ones too), then today's partitions of decay_scores and
    read_rate_metrics written by the functions those assets run (tests/defs run the assets themselves; a Dagster
    instance here would take a third of the time this test has); returns the tasks per randomised arm."""
    assert CliRunner().invoke(main, ["import", str(DEMO_FILE)]).exit_code == 0
    mem.set_switch("holdout", "", "50")
    arms = {"on": 0, "holdout": 0}
    for i in range(TASKS):
        task = f"T-{i}"
        held_out = mem.effective_memory(task)["source"] == V.ARM_HOLDOUT[1]
        mem.prompt_block("acme", task_id=task)
        arms["holdout" if held_out else "on"] += 1
        if (not held_out and i % 4) or (held_out and i % 5 == 0):
            mem.cite_from_text("acme", task, "per mem-3")
    with mem.connection() as conn:
        decay.score_day(conn, today)
        assert analytics.compute_read_rate(conn, today) > 0
    return arms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {}
    except urllib.error.URLError:  # not listening yet
        return 0, {}


def start_lab(tmp_path: Path, port: int, token: str) -> subprocess.Popen[bytes]:
    """`memory-assets lab` in its own session (so the server and its kernels stop as one group), Jupyter's own state
    under tmp_path."""
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), JUPYTER_PLATFORM_DIRS="1")
    command = [str(Path(sys.executable).with_name("memory-assets")), "lab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    command += ["--allow-root"] if os.geteuid() == 0 else []  # CI containers run as root; Jupyter asks for this
    log = (tmp_path / "lab.log").open("wb")
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(process: subprocess.Popen[bytes], tmp_path: Path, port: int, token: str) -> None:
    """Until the lab's REST API answers; a lab that exits or stays silent for 60 s fails the test with its log."""
    deadline = time.monotonic() + 60
    while get(f"http://127.0.0.1:{port}/api/status", token)[0] != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            pytest.fail("the lab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
        time.sleep(0.5)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the lab's process group (its id is the lab's pid), SIGKILL if it is still there after 20 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def execute_all(notebooks: list[nbformat.NotebookNode]) -> None:
    """Both notebooks at once, each on the kernel its metadata names, started in the notebooks' folder as the lab
    starts it."""
    await asyncio.gather(*(NotebookClient(nb, timeout=180, resources={"metadata": {"path": str(NOTEBOOKS)}})
                           .async_execute() for nb in notebooks))


def outputs_of(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def test_the_lab_serves_the_notebooks_and_both_execute_on_seeded_data(mem, tmp_path, today):
    port, token = free_port(), secrets.token_hex(16)
    lab = start_lab(tmp_path, port, token)  # it starts while the data is seeded
    try:
        arms = seed(mem, today)
        assert min(arms.values()) >= V.ARM_MIN_TASKS, arms
        wait_for(lab, tmp_path, port, token)
        base = f"http://127.0.0.1:{port}/api"
        assert get(f"{base}/contents/read_rate.ipynb")[0] == 403  # no token, no notebook
        status, served = get(f"{base}/contents/read_rate.ipynb?content=1", token)
        assert status == 200 and served["type"] == "notebook"
        assert served["content"]["cells"][0]["source"].startswith("# Read rate")
        assert served["content"]["metadata"]["kernelspec"]["name"] == V.LAB_KERNEL
        specs = get(f"{base}/kernelspecs", token)[1]["kernelspecs"]
        assert specs[V.LAB_KERNEL]["spec"]["argv"][0] == sys.executable  # the project's interpreter
    finally:
        stop(lab)
    assert lab.returncode is not None

    notebooks = [nbformat.read(NOTEBOOKS / name, as_version=4) for name in ("read_rate.ipynb", "memory_health.ipynb")]
    for notebook in notebooks:
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), "commit bare"
        assert notebook.metadata.kernelspec.name == V.LAB_KERNEL
        notebook.cells.insert(len(notebook.cells) - 1, nbformat.v4.new_code_cell(CANNOT_WRITE))
    asyncio.run(execute_all(notebooks))

    for notebook in notebooks:
        outputs = outputs_of(notebook)
        assert not [o for o in outputs if o.output_type == "error"]
        assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
        printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert f"{V.READER_ROLE} refused 4 writes" in printed
    read_rate = outputs_of(notebooks[0])
    tables = "".join(o.get("data", {}).get("text/html", "") for o in read_rate if o.output_type == "execute_result")
    assert "difference (on - holdout)" in tables and "95% CI low" in tables
    printed = "".join(o.get("text", "") for o in read_rate if o.output_type == "stream")
    assert "Memory on is higher" in printed  # about 3 in 4 tasks with memory on cite a unit, 1 in 5 held out
    pngs = sum("image/png" in o.get("data", {}) for o in read_rate if o.output_type == "display_data")
    assert pngs == 2  # read rate by kind and arm; the arms with their intervals
    with mem.connection() as conn:
        assert conn.execute("SELECT count(*) FROM memory_switch WHERE scope = 'kill'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM read_rate_arms").fetchone()[0] > 0
