"""Read-rate metrics (the kill metric) and the kill list."""

from datetime import UTC, datetime

import psycopg
import pytest

from memory_assets import analytics

TASK, EPIC, DEFAULT = ("on", "off", None), ("on", "off", None, "no-epic"), ("on", "off")


def test_read_rate_metrics_and_kill_list(mem, conn):
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    ignored = mem.remember(project="acme", kind="env", type="semantic", title="Ignored fact",
                           body="The lobby plant is watered on Tuesdays because it is a cactus.").token
    for i in range(6):
        mem.record_events("acme", f"T-{i}", [{"token": token, "kind": "injected"},
                                             {"token": ignored, "kind": "injected"}])
        if i % 2 == 0:
            mem.record_events("acme", f"T-{i}", [{"token": token, "kind": "read"}])
    today = datetime.now(UTC).date()
    assert analytics.compute_read_rate(conn, today) == 2
    rates = dict(conn.execute("SELECT 'mem-' || u.number, m.read_rate FROM read_rate_metrics m "
                              "JOIN memory_units u ON u.id = m.unit_id").fetchall())
    assert rates == {token: 0.5, ignored: 0.0}
    assert analytics.kill_list(conn)["token"].tolist() == [ignored]
    assert analytics.compute_read_rate(conn, today) == 2  # re-running a day replaces its rows


def test_the_analysts_connection_reads_the_measurements_and_cannot_write(mem, conn, clean):
    """Notebooks connect as memory_reader: every analytics frame works, no write of any kind does, and no unit text
    is readable, even after the session turns its read-only default off."""
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    mem.remember(project="acme", kind="env", type="semantic", title="Mine", persona="ana", visibility="private",
                 body="Ana's staging login goes through the bastion host.")
    mem.record_events("acme", "T-1", [{"token": token, "kind": "injected"}, {"token": token, "kind": "read"}])
    analytics.compute_read_rate(conn, datetime.now(UTC).date())
    with analytics.connect(clean) as reader:
        assert reader.execute("SELECT current_user").fetchone()[0] == "memory_reader"
        assert analytics.status_funnel(reader).to_dict("records") == [{"status": "active", "units": 2}]
        assert analytics.read_rate_by_day(reader)["read_rate"].tolist() == [1.0]
        for frame in (analytics.kill_list, analytics.review_queue, analytics.decay_latest,
                      analytics.rejections_by_reason):
            frame(reader)
        writes = ["INSERT INTO memory_switch VALUES ('kill', '', 'on')",
                  "UPDATE memory_units SET status = 'retired'",
                  "DELETE FROM memory_events",
                  "TRUNCATE read_rate_metrics",
                  "CREATE TABLE scratch (x int)",
                  "INSERT INTO audit_log (action) VALUES ('x')"]
        for sql in writes:
            with pytest.raises((psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)):
                reader.execute(sql)
        reader.execute("SET default_transaction_read_only = off")
        for sql in writes:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(sql)
        for sql in ("SELECT title FROM memory_units", "SELECT body FROM memory_inbox",
                    "SELECT bundle FROM memory_bundles", "SELECT embedding FROM memory_embeddings"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(sql)
    assert conn.execute("SELECT count(*) FROM memory_switch").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 2
