"""`genbench score --values FILE`: a value table from elsewhere (the layout of Dziugaite et al. 2020's data: hp.*
columns, gen.gap, complexity.* columns, rows of one grid point as its seeds) scored, filed as external records,
ranked in paired groups, listed apart and never verified. Scores checked against scipy / scikit-learn and the loop
references of test_scoring_rank."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from sklearn.linear_model import LinearRegression
from typer.testing import CliRunner

from genbench.cli import app
from genbench.entries.verify import EXTERNAL_PROBLEM, add_record, verify_record
from genbench.errors import GenbenchError
from genbench.leaderboard.standings import EXTERNAL_LABEL, rank_records, zoo_label
from genbench.record import Record, load_records
from genbench.zoo.importers.value_table import read_value_table
from test_scoring_rank import cmi_ref, rse_ref

N_TEST = 10_000
SEEDS = 4


def dziugaite_table(seed: int = 0, seeds: int = SEEDS) -> pd.DataFrame:
    """24 grid points (lr x depth x width x dataset) x `seeds` repeats in the columns of nin.cifar10_svhn.csv: the
    gap follows the hyperparameters; complexity.good follows the gap, complexity.noise does not (one value
    missing)."""
    rng = np.random.default_rng(seed)
    rows = []
    grid = itertools.product([0.001, 0.00316, 0.01], [2, 3], [8, 16], ["cifar10", "svhn"])
    for i, (lr, depth, width, dataset) in enumerate(grid):
        for _ in range(seeds):
            gap = 0.3 - 8 * lr + 0.05 * depth - 0.002 * width + 0.1 * (dataset == "cifar10") + rng.normal(0, 0.02)
            rows.append({"experiment_id": f"exp{i}", "hp.dataset": dataset, "hp.lr": lr, "hp.model_depth": depth,
                         "hp.model_width": width, "hp.train_dataset_size": 50000, "gen.train_acc": 1.0,
                         "gen.val_acc": 1.0 - gap, "gen.gap": gap, "is.converged": True,
                         "complexity.good": float(np.exp(5 * gap + rng.normal(0, 0.05))),
                         "complexity.noise": float(rng.normal()),
                         "complexity.params": float(depth * width ** 2)})
    df = pd.DataFrame(rows)
    df.loc[3, "complexity.noise"] = np.nan
    return df


@pytest.fixture
def table_file(tmp_path):
    path = tmp_path / "nin.toy_svhn.csv"
    dziugaite_table().to_csv(path, index=False)
    return path


def score_file(path, *args, results=None):
    """Run `genbench score ... --values path` and return the CLI result."""
    argv = ["score", "complexity.*", "--values", str(path), "--target", "gen.gap", "--n-boot", "200",
            "--higher-means", "complexity.good=larger_gap", *args]
    if results is not None:
        argv += ["--results", str(results)]
    return CliRunner().invoke(app, argv, env={"COLUMNS": "200"})


def test_scores_a_dziugaite_table_into_external_records_with_paired_groups(table_file, tmp_path):
    results = tmp_path / "results"
    out = score_file(table_file, results=results)
    assert out.exit_code == 0, out.output
    recs = {r.name: r for r in load_records(results)}
    assert set(recs) == {"complexity.good", "complexity.noise", "complexity.params", "baseline.hparams",
                         "baseline.hparams_main"}
    assert all(r.external and r.zoo_name == "external-nin.toy_svhn" for r in recs.values())
    assert zoo_label("external-nin.toy_svhn") == EXTERNAL_LABEL and EXTERNAL_LABEL.split(":")[0] in out.output
    # every entry on the same paired resamples; the planted measure leads its own group, above the recipe
    assert len({r.bootstrap["table_sha256"] for r in recs.values()}) == 1
    ranked = {r.name: r for r in rank_records(list(recs.values()), "kfold_r2")}
    good = ranked["complexity.good"]
    assert good.rank == 1 and good.rank_group == 1
    assert ranked["baseline.hparams"].rank_group > 1 and ranked["complexity.noise"].rank_group > 1
    assert good.score("delta_r2") > 0 and good.interval("delta_r2")[0] > 0
    assert "group" in out.output and "external-nin.toy_svhn" in out.output


def test_external_scores_equal_independent_computations(table_file, tmp_path):
    results = tmp_path / "results"
    assert score_file(table_file, results=results).exit_code == 0
    df = dziugaite_table()
    rec = Record.read(results / "external-nin.toy_svhn" / "complexity.good.json")
    order = np.argsort([f"row-{i + 1:02d}" for i in range(len(df))], kind="stable")
    mu, g = df["complexity.good"].to_numpy()[order], df["gen.gap"].to_numpy()[order]
    assert rec.values["value"] == pytest.approx(mu.tolist()) and rec.values["gap"] == pytest.approx(g.tolist())
    assert rec.score("tau") == pytest.approx(kendalltau(mu, g).statistic, abs=1e-12)
    phi = rec.transform_used["all"]
    x = (np.log(mu) if phi == "log" else mu)[:, None]
    r2 = LinearRegression().fit(x, g).score(x, g)
    assert rec.score("adj_r2") == pytest.approx(1 - (1 - r2) * (len(g) - 1) / (len(g) - 2), abs=1e-10)
    # the grid: hp.* columns as axes, the k-th row of a grid point as its k-th seed
    hp = df[["hp.lr", "hp.model_depth", "hp.model_width", "hp.dataset"]].iloc[order].reset_index(drop=True)
    hp.columns = ["lr", "model_depth", "model_width", "dataset"]
    hp["seed"] = df.groupby(["hp.lr", "hp.model_depth", "hp.model_width", "hp.dataset"]).cumcount().to_numpy()[order]
    assert rec.score("cmi") == pytest.approx(cmi_ref(mu, g, hp)[0], abs=1e-9)
    losses = rse_ref(mu, g, hp, N_TEST)
    assert losses, "the fixture must give environments with enough effective sample size"
    assert rec.score("sign_error_worst") == pytest.approx(max(losses), abs=1e-12)
    assert rec.score("sign_error_mean") == pytest.approx(float(np.mean(losses)), abs=1e-12)
    noise = Record.read(results / "external-nin.toy_svhn" / "complexity.noise.json")
    assert noise.data["scores"]["n"] == len(df) - 1  # the missing value dropped, not imputed
    assert rec.higher_means == "larger_gap" and noise.higher_means is None


def test_external_records_are_listed_apart_and_never_verified(table_file, tmp_path):
    results = tmp_path / "results"
    assert score_file(table_file, results=results).exit_code == 0
    out = CliRunner().invoke(app, ["leaderboard", "--results", str(results)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "external values" in out.output and "complexity.good" in out.output
    path = results / "external-nin.toy_svhn" / "complexity.good.json"
    assert verify_record(path).problems == [EXTERNAL_PROBLEM]
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    v = add_record(path, shipped)
    assert v.problems == [EXTERNAL_PROBLEM] and not any(shipped.iterdir())


def test_seed_and_id_columns_are_used(tmp_path):
    df = dziugaite_table()
    df["hp.seed"] = df.groupby("experiment_id").cumcount() + 10
    df["run"] = [f"m{i:03d}" for i in range(len(df))]
    path = tmp_path / "runs.parquet"
    df.to_parquet(path)
    vt = read_value_table(path, measures=["complexity.good"], target="gen.gap", id_column="run")
    assert sorted(vt.zoo.hparams) == ["dataset", "lr", "model_depth", "model_width", "seed", "train_dataset_size"]
    assert vt.zoo.hparams["seed"] == ["10", "11", "12", "13"]
    assert vt.values["model_id"].tolist() == sorted(df["run"])
    assert vt.zoo.name == "external-runs" and vt.zoo.manifest["external"]["id_column"] == "run"


@pytest.mark.parametrize("change, argv, message", [
    (None, ["--target", "gen_gap"], "Did you mean 'gen.gap'"),
    (None, ["--id", "experiment_id"], "duplicate model ids in column 'experiment_id'"),
    (lambda d: d.assign(**{"gen.gap": d["gen.gap"].where(d.index != 5)}), [], "no finite value in data row(s) 6"),
    (lambda d: d.assign(**{"hp.lr": d["hp.lr"].where(d.index != 2)}), [], "empty value in data row(s) 3"),
    (lambda d: d.assign(**{"complexity.noise": d["complexity.noise"].astype(object).where(d.index != 7, "big")}), [],
     "not a number ('big' in data row 8)"),
    (None, ["--higher-means", "complexity.good=up"], "must be one of ('larger_gap', 'smaller_gap')"),
    (lambda d: d.assign(run=[None] + [f"m{i}" for i in range(1, len(d))]), ["--id", "run"],
     "the model id column 'run' is empty in data row(s) 1"),
    (lambda d: d.assign(seed=0), [], "repeats a seed within one grid point"),
    (lambda d: d.assign(**{"hp.wd": np.arange(len(d)) * 1e-4}), [], "more than 20 levels"),
    (lambda d: d.rename(columns={"complexity.noise": "complexity.good"}), [], "more than once"),
    (lambda d: d.head(2), [], "2 model(s) with values, and nothing can be scored on fewer than 3 (one row per model)"),
    # the pattern matched the target only: scored nothing, and replaced the table's earlier records
    (lambda d: d[[c for c in d.columns if not c.startswith("complexity.")]].rename(columns={"gen.gap": "complexity.gap"}),
     ["--target", "complexity.gap"], "'complexity.*' match(es) no measure column, only the target 'complexity.gap'"),
    (None, ["--higher-means", "complexity.good=larger_gap", "--higher-means", "complexity.good=smaller_gap"],
     "--higher-means gives complexity.good two directions, larger_gap and smaller_gap: give one"),
])
def test_bad_tables_get_one_clear_line_and_nothing_written(tmp_path, change, argv, message):
    df = dziugaite_table()
    path = tmp_path / "t.csv"
    (change(df) if change else df).to_csv(path, index=False)
    results = tmp_path / "results"
    base = ["score", "complexity.*", "--values", str(path), "--results", str(results), "--n-boot", "50"]
    if "--target" not in argv:
        base += ["--target", "gen.gap"]
    out = CliRunner().invoke(app, base + argv)
    assert out.exit_code != 0 and isinstance(out.exception, GenbenchError) and message in str(out.exception)
    assert not results.exists()


def test_a_table_of_another_separator_or_a_broken_parquet_file_gets_the_hint_that_fits(tmp_path):
    """A ';'-separated CSV read as one column said 'Known: hp.w;gap;m1'; a broken parquet file got the CSV hint."""
    semi = tmp_path / "semi.csv"
    dziugaite_table().to_csv(semi, index=False, sep=";")
    with pytest.raises(GenbenchError, match=r"semi.csv reads as one column \('experiment_id;hp.dataset;.*\): its fields look "
                                            r"separated by semicolons; write the table with commas"):
        read_value_table(semi, measures=["complexity.good"], target="gen.gap")
    broken = tmp_path / "t.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(GenbenchError, match=r"cannot read .*t.parquet as a table \(.*\); a parquet file written by "
                                            "pandas or pyarrow$"):
        read_value_table(broken, measures=["complexity.good"], target="gen.gap")


def test_unknown_measure_column_and_file_kind_are_refused(tmp_path):
    path = tmp_path / "t.csv"
    dziugaite_table().to_csv(path, index=False)
    with pytest.raises(GenbenchError, match="Did you mean 'complexity.good'"):
        read_value_table(path, measures=["complexity.god"], target="gen.gap")
    other = tmp_path / "t.json"
    other.write_text(json.dumps({"a": 1}))
    with pytest.raises(GenbenchError, match="must be a CSV"):
        read_value_table(other, measures=["x"], target="gen.gap")
    with pytest.raises(GenbenchError, match="a folder; name the table's file"):  # not "no such file"
        read_value_table(tmp_path, measures=["x"], target="gen.gap")
    out = CliRunner().invoke(app, ["score", "complexity.good"])
    assert out.exit_code != 0 and "--values FILE" in str(out.exception)
    out = CliRunner().invoke(app, ["score", "complexity.good", "--zoo", "digits-mlp", "--id", "run"])
    assert out.exit_code != 0 and "apply to a table from elsewhere" in str(out.exception)


def test_a_zoos_own_values_scored_as_a_table_from_elsewhere_give_its_point_scores(digits_zoo, tmp_path):
    """The same models, values and grid scored both ways: every point score agrees (the folds follow the model ids;
    only the intervals differ, since the resamples follow the table's hash)."""
    import genbench as gb

    names = ["norm.fro_sum", "init.dist_fro"]
    values = gb.evaluate(names, digits_zoo, progress=False)
    own = gb.score(values, digits_zoo, measures=names, n_boot=50)
    t = digits_zoo.table.set_index("model_id").loc[values["model_id"]]
    hp = [c for c in t.columns if c.startswith("hp.") and t[c].nunique() > 1]
    export = t[[*hp, "gap"]].reset_index().assign(**{n: values[n].to_numpy() for n in names})
    path = tmp_path / "digits.csv"
    export.to_csv(path, index=False)
    claims = {n: gb.get_measure(n).higher_means for n in names}
    vt = read_value_table(path, measures=names, target="gap", id_column="model_id", test_size=int(
        digits_zoo.manifest.get("test_size", 10_000)), higher_means={n: c for n, c in claims.items() if c})
    theirs = gb.score(vt.values, vt.zoo, measures=vt.measures, n_boot=50)
    for n in names:
        for key in ("kfold_r2", "kfold_r2_free", "adj_r2", "delta_r2", "tau", "psi", "cmi", "sign_error_mean"):
            a, b = own[n].values.get(key), theirs[n].values.get(key)
            assert (a is None) == (b is None), (n, key)
            if a is not None:
                assert b == pytest.approx(a, rel=1e-9, abs=1e-12, nan_ok=True), (n, key)


def test_scoring_a_table_again_replaces_its_records_and_rescore_passes_them_by(table_file, tmp_path):
    from genbench.entries.rescore import rescore_folder

    results = tmp_path / "results"
    assert score_file(table_file, results=results).exit_code == 0
    df = dziugaite_table().drop(columns=["complexity.noise"])
    df.to_csv(table_file, index=False)
    out = score_file(table_file, results=results)
    assert out.exit_code == 0 and "replacing 5" in " ".join(out.output.split())
    names = {r.name for r in load_records(results)}
    assert "complexity.noise" not in names and len(names) == 4
    said: list[str] = []
    assert rescore_folder(results, say=said.append) == [] and "external values" in said[0]
    board = CliRunner().invoke(app, ["leaderboard", "--results", str(results)])
    assert board.exit_code == 0, board.output
