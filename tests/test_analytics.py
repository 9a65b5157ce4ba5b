"""Read-rate metrics (the kill metric) and the kill list."""

from datetime import UTC, datetime

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
