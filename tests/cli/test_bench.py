"""`memory-assets bench` runs the checkout's harness (bench/harness.py) with the chosen size, parts and folder."""

import json

from click.testing import CliRunner

from memory_assets.cli import bench, main


def test_bench_runs_the_harness_and_writes_its_report_where_asked(tmp_path):
    result = CliRunner().invoke(main, ["bench", "--size", "smoke", "--only", "none", "--out", str(tmp_path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "harness.json").read_text())
    assert report["size"] == "smoke" and report["parts"] == {}  # no part is called "none"
    assert all(goal["verdict"].startswith("not measured") for goal in report["goals"])
    assert (tmp_path / "summary.md").read_text().startswith("# Benchmarks (smoke size)")


def test_bench_passes_every_option_to_the_harness_and_refuses_an_unknown_size():
    args = bench.harness_args("full", "/tmp/out", "peer", "load", 60.0)
    assert args[1] == str(bench.HARNESS) and args[2:] == ["--size", "full", "--out", "/tmp/out", "--only", "peer",
                                                         "--skip", "load", "--part-timeout", "60.0"]
    assert CliRunner().invoke(main, ["bench", "--size", "huge"]).exit_code == 2
