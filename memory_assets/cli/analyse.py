"""The analysts' lab: JupyterLab over notebooks/ on the project's own kernel, reading as the read-only role."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from memory_assets import database
from memory_assets import vocabulary as V


def register_kernel() -> str:
    """Install the kernel spec LAB_KERNEL for this interpreter (the project's .venv) into its own prefix, unless it is
    there already, so the notebooks run with the project's packages whichever Jupyter opens them; returns its name."""
    from ipykernel.kernelspec import install  # Jupyter loads only for this command
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        if KernelSpecManager().get_kernel_spec(V.LAB_KERNEL).argv[0] == sys.executable:
            return V.LAB_KERNEL
    except NoSuchKernel:
        pass
    install(prefix=sys.prefix, kernel_name=V.LAB_KERNEL, display_name=f"{V.LAB_KERNEL} (.venv)")
    return V.LAB_KERNEL


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--notebooks", default="notebooks", show_default=True, type=click.Path(file_okay=False, exists=True),
              help="The folder JupyterLab serves.")
@click.argument("jupyter_args", nargs=-1, type=click.UNPROCESSED)
def lab(notebooks: str, jupyter_args: tuple[str, ...]) -> None:
    """Start JupyterLab on the project's kernel; further arguments go to `jupyter lab` (--port, --no-browser, ...).
    Notebooks connect through analytics.connect() as memory_reader, never as the owner."""
    register_kernel()
    env = dict(os.environ)
    # kernels start in the notebooks' folder: name the state folder absolutely so they attach to the same server
    env.setdefault(V.HOME_ENV, str(database.memory_home()))
    if env.get(V.ANALYST_URL_ENV):  # the lab then knows the reader's URL only, not the application's
        env.pop(V.DATABASE_URL_ENV, None)
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={Path(notebooks).resolve()}", *jupyter_args]
    sys.stdout.flush()
    os.execve(command[0], command, env)
