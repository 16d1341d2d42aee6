"""The PGDL score in the competition's units (issue 28 item 2): on an imported PGDL task every entry's scores carry
`pgdl_score` = 100 x CMI (PGDL), as the organisers' scorer printed it, and the leaderboard shows it as a column there;
on any other zoo the column is absent and no note says so."""
from __future__ import annotations

import numpy as np
import pytest

from genbench.entries.external import score_value_table
from genbench.leaderboard.export import leaderboard_table, view_notes
from genbench.leaderboard.standings import hidden_lines, rank_records
from genbench.record import Record
from genbench.scoring import score
from genbench.zoo.importers.value_table import read_value_table
from test_external_values import dziugaite_table
from test_scoring_rank import pgdl_ref


def table(tmp_path, *, pgdl: bool):
    """The Dziugaite-layout table read as a zoo; `pgdl`: its manifest says it was imported from a PGDL task."""
    path = tmp_path / ("task.csv" if pgdl else "sweep.csv")
    dziugaite_table(seeds=2).to_csv(path, index=False)  # 48 models: the scorer's loop reference is quadratic
    vt = read_value_table(path, measures=["complexity.good", "complexity.noise"], target="gen.gap")
    if pgdl:
        vt.zoo.manifest["imported"] = {"kind": "pgdl"}
    return vt


def test_pgdl_score_is_100_times_the_scorers_cmi_on_a_pgdl_task_only(tmp_path):
    vt = table(tmp_path, pgdl=True)
    s = score(vt.values, vt.zoo, measures=vt.measures, n_boot=50)["complexity.good"]
    t = vt.zoo.table.set_index("model_id").loc[vt.values["model_id"]]
    hp = t[[c for c in t.columns if c.startswith("hp.")]].rename(columns=lambda c: c[3:]).reset_index(drop=True)
    mu, g = vt.values["complexity.good"].to_numpy(), t["gap"].to_numpy()
    assert s.values["pgdl_score"] == pytest.approx(100 * pgdl_ref(mu, g, hp), abs=1e-9)
    assert s.values["pgdl_score"] == pytest.approx(100 * s.values["cmi_pgdl"], rel=1e-12)
    if "cmi_pgdl" in s.intervals:
        assert np.allclose(s.intervals["pgdl_score"], [100 * v for v in s.intervals["cmi_pgdl"]])
    plain = table(tmp_path, pgdl=False)
    other = score(plain.values, plain.zoo, measures=plain.measures, n_boot=50)["complexity.good"]
    assert "pgdl_score" not in other.values and other.values["cmi_pgdl"] == pytest.approx(s.values["cmi_pgdl"])


def test_the_leaderboard_shows_the_pgdl_score_on_pgdl_tasks_and_says_nothing_of_it_elsewhere(tmp_path):
    records = [Record(r) for pgdl in (True, False)
               for r in score_value_table(table(tmp_path, pgdl=pgdl), n_boot=50)]
    ranked = rank_records(records, "kfold_r2")
    rows = leaderboard_table(records, "kfold_r2", ranked=ranked).set_index(["zoo", "entry"])
    task, sweep = "external-task", "external-sweep"
    rec = next(r for r in records if r.zoo_name == task and r.name == "complexity.good")
    assert rows.loc[(task, "complexity.good"), "pgdl_score"] == pytest.approx(100 * rec.score("cmi_pgdl"))
    notes = view_notes(ranked, "kfold_r2", records=records)
    assert "pgdl_score" in notes.hidden[sweep] and "pgdl_score" not in notes.hidden[task]
    assert not any("PGDL score" in line for z in notes.hidden for line in hidden_lines(notes.hidden[z]))
    from genbench.leaderboard import write_site
    index = write_site(records, tmp_path / "site")
    page = index.read_text()
    assert page.count('data-col="pgdl_score"') > 0 and "PGDL score" in page
    notes_part = page[page.index('id="zoo-external-sweep"'):]
    assert 'data-score="pgdl_score"' not in notes_part  # the sweep's table shows no column and says nothing of it
