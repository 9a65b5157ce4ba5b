"""The evaluation commands' input checks: a bad setting, model or k is bad input (exit 2) before anything runs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memory_assets.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([]))
    return str(path)


@pytest.mark.parametrize(("args", "field"), [
    (["--setting", "bogus=on"], "setting"),
    (["--setting", "kinds"], "setting"),
    (["--setting", "as_of=2024-01-01"], "setting"),  # what the evaluation sets itself
    (["--model", "no-such-model"], "model"),
    (["--k", "5,x"], "k"),
])
def test_eval_locomo_refuses_bad_settings_models_and_k(clean, data, args, field):
    result = run("eval", "locomo", "--data", data, *args)
    assert result.exit_code == 2, result.output
    assert f"{field}:" in result.output


def test_fit_fusion_needs_r_at_10_to_decide(clean, data, tmp_path):
    result = run("eval", "fit-fusion", "--data", data, "--k", "1,5", "--out", str(tmp_path / "w.json"))
    assert result.exit_code == 2 and "k: must include 10" in result.output
    assert not (tmp_path / "w.json").exists()


def test_eval_help_lists_folds_settings_and_fit_fusion():
    assert "fit-fusion" in run("eval", "--help").output
    text = run("eval", "locomo", "--help").output
    assert "--folds" in text and "--setting" in text and "--model" in text
