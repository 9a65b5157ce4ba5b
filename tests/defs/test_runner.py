"""The Dagster instance `make dev` and the in-process runs use: its dagster.yaml names no credential."""

import os

import dagster as dg
import psycopg

from memory_assets import vocabulary as V
from memory_assets.defs import runner


def test_the_written_dagster_yaml_holds_no_url_or_password(database_url, tmp_path):
    """The storage URL (with its password) reaches Dagster through the environment the dev processes inherit."""
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    # the embedded server trusts its socket, so any password connects; a configured server keeps its own
    password = str(info.get("password") or "pw-only-in-the-environment")
    url = psycopg.conninfo.make_conninfo(database_url, password=password)
    home = runner.dagster_home(url, str(tmp_path))
    written = (home / "dagster.yaml").read_text()
    stored = os.environ[V.DAGSTER_STORAGE_URL_ENV]
    assert password in stored and "postgresql" in stored
    for secret in (password, stored, str(info.get("host")), "postgresql"):
        assert secret not in written
    assert f"env: {V.DAGSTER_STORAGE_URL_ENV}" in written
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert instance.get_runs(limit=1) is not None  # the storage connected through the environment
    finally:
        instance.dispose()
