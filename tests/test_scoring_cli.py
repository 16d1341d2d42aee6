"""`genbench score --zoo` says what it is doing and what it found: a line per measure scored (on stderr) and, after
the table, the baseline rows and the verdict sentence `genbench leaderboard` opens the zoo with, for these scores."""
from __future__ import annotations

import re

from typer.testing import CliRunner

from genbench.cli import app


def test_score_shows_progress_and_ends_with_the_baselines_and_the_leaderboards_verdict(digits_zoo):
    res = CliRunner().invoke(app, ["score", "norm.fro_prod", "norm.params", "--zoo", "digits-mlp",
                                   "--n-boot", "50"], terminal_width=200)
    assert res.exit_code == 0, res.output
    out = res.output
    # one progress line per measure, in order, before the tables (the old command printed nothing until the end)
    lines = re.findall(r"\[(\d)/2\] scored (\S+) \(", out)
    assert [int(i) for i, _ in lines] == [1, 2] and {n for _, n in lines} == {"norm.fro_prod", "norm.params"}
    assert out.index("[2/2] scored") < out.index("norm.fro_prod", out.index("[2/2] scored") + 30)
    for row in ("baseline.hparams", "baseline.train_loss", "baseline.train_acc"):
        assert row in out, out
    # the recipe's own "adds" is refused: one dash and its footnote's number, as the footnote below writes it
    recipe = next(line for line in out.splitlines() if line.split()[:1] == ["baseline.hparams"])
    mark = re.search(r"\u2014+\[(\d)\]", recipe)
    assert mark and mark.group(0) == f"\u2014[{mark.group(1)}]", recipe
    assert f"\u2014[{mark.group(1)}] refused: baseline.hparams: adds to the recipe" in " ".join(out.split())
    # the verdict sentence, as the leaderboard words it: the best measure against baseline.hparams, paired
    text = " ".join(out.split())  # the console wraps long lines
    verdict = re.search(r"(No measure beats the recipe \(baseline\.hparams [0-9.]+\); the best measure, (\S+), "
                        r"reaches|(\S+) beats the recipe: k-fold R² [0-9.-]+ against baseline\.hparams|No measure is "
                        r"told apart from the recipe \(baseline\.hparams [0-9.]+\): the best, (\S+), reaches)", text)
    assert verdict, text[-1500:]
    best = next(g for g in verdict.groups()[1:] if g).rstrip(",")
    assert best in ("norm.fro_prod", "norm.params")
    assert text.index(verdict.group(0)) > text.index("baseline.train_acc")  # the command ends with it


def test_score_refuses_a_value_table_of_fewer_models_than_any_score_needs(digits_zoo, tmp_path):
    """Two models with values: refused at once, not a minute of baselines on the whole zoo and empty scores."""
    from genbench.errors import GenbenchError
    from genbench.harness.evaluate import evaluate
    from genbench.harness.values import save_values
    df = evaluate(["norm.params"], digits_zoo)
    path = save_values(df.iloc[:2], tmp_path / "two.parquet")
    res = CliRunner().invoke(app, ["score", "norm.params", "--zoo", "digits-mlp", "--values", str(path)])
    assert isinstance(res.exception, GenbenchError), res.output
    assert str(res.exception) == ("the value table of zoo 'digits-mlp': 2 model(s) with values, and nothing can be "
                                  "scored on fewer than 3 (evaluate more of its models: `genbench evaluate MEASURE... "
                                  "--zoo digits-mlp`)")
    assert "scored" not in res.output  # refused before the measures' and baselines' scores
