"""The verdict in every view: each zoo's sentence (best measure, its paired difference to baseline.hparams checked
against a brute-force resampling loop with scikit-learn's r2_score, the entries adding to the recipe), the "against
its claim" mark in the terminal, the exports and the page data, and what `genbench submit` ends with."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console
from sklearn.metrics import r2_score

from genbench.leaderboard.export import AGAINST, leaderboard_table, markdown, view_notes
from genbench.leaderboard.standings import rank_records
from genbench.leaderboard.terminal import print_leaderboard
from genbench.leaderboard.verdict import direction_text, entry_verdict, paired_difference, zoo_verdict
from genbench.record import Record
from genbench.scoring.resample import resample_weights
from site_records import gaps, heldout_of, scored_record

N, N_BOOT = 120, 60


def _zoo(best_noise: float, *, deltas: dict[str, float] | None = None, against: tuple[str, ...] = ()):
    """On one zoo: two measures (the gap plus noise of `best_noise` and 0.9 gap sds) and baseline.hparams (0.5 sds);
    `deltas` give the measures a delta_r2 (interval +-0.05), `against` marks them against their claim."""
    gap = gaps(N, 3)
    rng = np.random.default_rng(4)
    recs = []
    for name, sd, seed in (("m.best", best_noise, 1), ("m.other", 0.9, 2), ("baseline.hparams", 0.5, 3)):
        extra = {"delta_r2": (deltas or {}).get(name)} if name in (deltas or {}) else None
        rec = scored_record(name, "z", gap, heldout_of(gap, rng.normal(0, sd * gap.std(), N), seed), n_boot=N_BOOT,
                            baseline=name.startswith("baseline."), extra=extra)
        if not rec["baseline"]:
            rec["scores"]["direction"] = {"claim": "larger_gap", "slope": -1.0 if name in against else 1.0,
                                          "tau": 1.0, "against": name in against, "flat_folds": 0, "folds": 100}
        recs.append(rec)
    return gap, recs


def _brute_difference(gap, a, b, n_boot=N_BOOT):
    """The paired bootstrap of k-fold R^2(a) - k-fold R^2(b) by hand: each resample materialised by repeating the
    models, each shuffle's R^2 from scikit-learn, averaged over the shuffles."""
    w = resample_weights(len(gap), table_sha256=a["zoo"]["table_sha256"], seed=0, n_boot=n_boot)
    ha, hb = np.array(a["values"]["heldout"]), np.array(b["values"]["heldout"])
    draws = []
    for counts in w:
        idx = np.repeat(np.arange(len(gap)), counts)
        draws.append(np.mean([r2_score(gap[idx], h[idx]) for h in ha])
                     - np.mean([r2_score(gap[idx], h[idx]) for h in hb]))
    point = a["scores"]["values"]["kfold_r2"] - b["scores"]["values"]["kfold_r2"]
    return point, *np.quantile(draws, [0.025, 0.975])


@pytest.mark.parametrize("noise, word", [(0.1, "beats the recipe"), (1.5, "No measure beats the recipe")])
def test_the_zoo_verdict_compares_the_best_measure_with_the_recipe_pairwise(noise, word):
    gap, recs = _zoo(noise, deltas={"m.best": 0.08, "m.other": 0.02})
    ranked = rank_records(recs)
    v = zoo_verdict("z", [r for r in ranked])
    best = next(r for r in recs if r["name"] == ("m.best" if noise < 0.9 else "m.other"))
    recipe = next(r for r in recs if r["name"] == "baseline.hparams")
    assert v.best.name == best["name"]
    expected = _brute_difference(gap, best, recipe)
    assert v.difference == pytest.approx(expected, abs=1e-9)
    assert paired_difference("z", Record(best), Record(recipe)) == pytest.approx(expected, abs=1e-9)
    text = v.sentence()
    assert word in text and "baseline.hparams" in text
    assert (v.beats_recipe is True) == (noise < 0.9)
    # m.best's delta 0.08 [0.03, 0.13] adds; m.other's 0.02 [-0.03, 0.07] does not
    assert [r.name for r in v.adds] == ["m.best"]
    if v.best.name == "m.best":
        assert "adds 0.080 [0.030, 0.130] to it" in text and "no other measure adds to the recipe" in text
    else:
        assert "adds nothing to it (0.020 [-0.030, 0.070])" in text and "also adding to the recipe: m.best" in text


def test_the_settled_additions_are_named_before_the_larger_unsettled_ones():
    """Over trainings the sentence names what a new training is predicted to show first: a settled 0.06 before an
    unsettled 0.09 (by the size of the delta alone, the other way round)."""
    import copy
    _, recs = _zoo(0.1, deltas={"m.best": 0.08, "m.other": 0.09})
    other = next(r for r in recs if r["name"] == "m.other")
    third = copy.deepcopy(other)
    third["name"] = third["measure"] = "m.third"
    third["scores"]["values"]["delta_r2"], third["scores"]["intervals"]["delta_r2"] = 0.06, [0.01, 0.11]
    for rec, settled in ((other, False), (third, True)):
        rec["scores"]["verdicts"] = {"adds_to_recipe": {"holds": True, "trainings": [3, 3], "open": 0,
                                                        "settled": settled, "predicted": [0.004 if settled else -0.01, 0.2]}}
    v = zoo_verdict("z", rank_records([*recs, third]))
    assert [r.name for r in v.adds if r.name != "m.best"] == ["m.third", "m.other"]
    text = v.sentence()
    assert text.index("m.third 0.060") < text.index("m.other 0.090")
    assert "m.other 0.090 [0.040, 0.140] (on 3 of 3 trainings, unsettled: a new training's interval is predicted within" \
           " [-0.010, 0.200], which contains 0)" in text

def test_a_delta_without_an_interval_is_said_undecided_not_a_crash():
    """Too few resamples (`genbench score --n-boot 5`) leave delta_r2 without an interval: the sentence says the entry
    may or may not add to the recipe (it raised TypeError on float(None))."""
    _, recs = _zoo(0.1, deltas={"m.best": 0.08})
    best = next(r for r in recs if r["name"] == "m.best")
    del best["scores"]["intervals"]["delta_r2"]
    v = zoo_verdict("z", rank_records(recs))
    assert v.adds == []  # an addition needs its interval above 0
    assert "may or may not add to it (0.080: no interval" in v.sentence()
    lines = entry_verdict(Record(best), rank_records(recs))
    assert any(line.startswith("may or may not add to the recipe (0.080") for line in lines)


@pytest.mark.parametrize("lo, adds, shown", [(0.0002, True, "[0.0002, 0.007]"), (-0.0001, False, "[-0.0001, 0.007]"),
                                              (0.0, False, "[0.000, 0.007]"), (0.0031, True, "[0.003, 0.007]")])
def test_an_adds_interval_near_zero_shows_the_sign_that_decides_it(lo, adds, shown):
    """At 3 decimals 0.0002 and -0.0001 both printed as 0.000: one end adds to the recipe and the other not."""
    from genbench.leaderboard.format import interval

    _, recs = _zoo(0.1, deltas={"m.best": 0.003})
    best = next(r for r in recs if r["name"] == "m.best")
    best["scores"]["intervals"]["delta_r2"] = [lo, 0.0071]
    text = zoo_verdict("z", rank_records(recs)).sentence()
    assert (f"adds 0.003 {shown} to it" if adds else f"adds nothing to it (0.003 {shown})") in text
    rng = np.random.default_rng(0)
    for e in rng.normal(size=500) * 10.0 ** rng.integers(-9, 1, size=500):
        end = interval(e, 1.0, digits=3)[1:].split(",")[0]
        assert np.sign(float(end)) == np.sign(e) and abs(float(end) - e) <= 0.5 * 10.0 ** -max(
            3, len(end.split(".")[1])) + 1e-15
        assert len(end.split(".")[1]) == 3 or f"{e:.3f}" in ("0.000", "-0.000")  # more decimals only near 0


def test_without_a_recipe_record_the_sentence_says_so():
    _, recs = _zoo(0.1)
    recs = [r for r in recs if not r["baseline"]]
    text = zoo_verdict("z", rank_records(recs)).sentence()
    assert text.startswith("The best measure, m.best, reaches k-fold R\u00b2 ")
    assert "no baseline.hparams record on this zoo to compare it with" in text


def test_an_entry_against_its_claim_is_marked_in_the_terminal_the_exports_and_the_sentence():
    _, recs = _zoo(0.1, against=("m.other",))
    ranked = rank_records(recs)
    table, notes = leaderboard_table(recs, ranked=ranked), view_notes(ranked, records=recs)
    assert dict(zip(table["entry"], table["claim"])) == {"m.best": "as claimed", "m.other": AGAINST,
                                                         "baseline.hparams": ""}
    assert notes.verdicts["z"].endswith("; 1 measure runs against its own claim.")
    for width in (80, 200):
        out = Console(file=io.StringIO(), width=width, color_system=None)
        print_leaderboard(out, table, ranked, "kfold_r2", notes)
        text = out.file.getvalue()
        assert "m.other !" in text and "m.best !" not in text
        assert "! after an entry's name: against its claim" in text
        assert " ".join(text.split()).startswith("z (not an official zoo): m.best beats the recipe")  # opens the zoo
    md = markdown(table, notes)
    assert "m.other (against its claim)" in md and "m.best (against" not in md
    assert "against its claim: the entry's free slope or Kendall" in md


def test_submit_ends_with_rank_group_recipe_difference_delta_and_direction():
    gap, recs = _zoo(0.1, deltas={"m.best": 0.08, "m.other": 0.02}, against=("m.other",))
    ranked = rank_records(recs)
    best, other = (Record(next(r for r in recs if r["name"] == n)) for n in ("m.best", "m.other"))
    lines = entry_verdict(best, ranked)
    assert lines[0].startswith("rank 1 of 2 measures, group 1 (k-fold R\u00b2 ")
    d = _brute_difference(gap, best.data, next(r for r in recs if r["name"] == "baseline.hparams"))
    assert lines[1].startswith("above the recipe: baseline.hparams ") and f"{d[0]:.3f} [{d[1]:.3f}, {d[2]:.3f}]" in \
        lines[1]
    assert lines[2] == "adds 0.080 [0.030, 0.130] to the recipe"
    assert lines[3].startswith("direction: as claimed (larger_gap")
    lines = entry_verdict(other, ranked)
    assert lines[0].startswith("rank 2 of 2 measures")
    assert lines[2] == "adds nothing to the recipe (0.020 [-0.030, 0.070])"
    assert lines[3].startswith("AGAINST ITS CLAIM: it declares larger_gap, but its free slope is negative")
    other.data["scores"]["direction"]["slope"] = None  # no regression (too few models): tau alone runs against
    assert "its free slope is none (no regression score) and its Kendall" in direction_text(other)
    alone = [r for r in recs if not r["baseline"]]
    assert "no baseline.hparams record on z to compare with" in entry_verdict(best, rank_records(alone))[1]


def test_the_csv_export_keeps_the_free_kfold_r2_and_the_delta_with_intervals(tmp_path):
    _, recs = _zoo(0.1, deltas={"m.best": 0.08})
    recs[0]["scores"]["values"]["kfold_r2_free"] = 0.5
    table = leaderboard_table(json.loads(json.dumps(recs)))
    row = table.set_index("entry").loc["m.best"]
    assert row["delta_r2"] == 0.08 and (row["delta_r2_lo"], row["delta_r2_hi"]) == pytest.approx((0.03, 0.13))
    assert row["kfold_r2_free"] == 0.5


@pytest.mark.parametrize("width", [80, 200])
def test_the_score_view_never_cuts_a_name_or_a_number_and_says_what_it_drops(tmp_path, width):
    from genbench.leaderboard.terminal import print_scores
    from genbench.scoring.scores import score
    from planted import GRID, gap_of, planted_gap, values_of, write_zoo

    zoo = write_zoo(tmp_path / "planted", GRID, planted_gap)
    y = gap_of(zoo)
    rng = np.random.default_rng(0)
    a = values_of(zoo, y + 0.01 * rng.normal(size=len(y)), name="a.measure_with_a_rather_long_name")
    b = values_of(zoo, -y + 0.01 * rng.normal(size=len(y)), name="b.against")  # runs against its claim
    a["b.against"], a["b.against:error"] = b["b.against"], None
    a.attrs["measures"].update(b.attrs["measures"])
    scores = score(a, zoo, n_boot=50)
    out = Console(file=io.StringIO(), width=width, color_system=None)
    print_scores(out, scores, zoo.name, "gap")
    text = out.file.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width and "\u2026" not in text
    s = scores["a.measure_with_a_rather_long_name"]
    row = next(line for line in text.splitlines() if line.startswith(" a.measure_with_a_rather_long_name "))
    lo, hi = s.intervals["kfold_r2"]
    assert f"{s.kfold_r2:.2f} [{lo:.2f}, {hi:.2f}]" in row
    assert "b.against !" in text and "! after a measure: against its claim" in " ".join(text.split())
    assert ("not shown at this width" in text) == (width == 80)
    shared = [line for line in text.splitlines() if "robust sign-error" in line]
    assert len(shared) <= 1 or all(not line.startswith("  b.against:") for line in shared)  # said once for both


def test_the_score_view_says_a_note_every_measure_shares_once_for_all_of_them():
    from genbench.leaderboard.terminal import print_scores
    from genbench.scoring.scores import Scores
    from genbench.scoring.spec import MeasureScores

    def scored(name: str, notes: list[str]) -> MeasureScores:
        s = MeasureScores(measure=name, kind="scalar", transform="linear", target="gap", n=50, dropped=0, features=1)
        s.values["kfold_r2"], s.notes = 0.5, notes
        return s

    def said(names: tuple[str, ...], alone: bool) -> str:
        items = {n: scored(n, ["shared note"]) for n in names}
        if alone:
            items["m.z"] = scored("m.z", ["its own note"])
        out = Console(file=io.StringIO(), width=200, color_system=None)
        print_scores(out, Scores("z", "gap", items), "z", "gap")
        return " ".join(out.file.getvalue().split())

    assert "m.a, m.b, m.c: shared note" in said(("m.a", "m.b", "m.c"), alone=True)  # m.z does not share it
    text = said(("m.a", "m.b", "m.c"), alone=False)
    assert "all 3 measures: shared note" in text and "m.a, m.b" not in text
    assert "m.a, m.b: shared note" in said(("m.a", "m.b"), alone=False)  # two are named


def test_the_score_view_wraps_the_folds_phi_rather_than_cut_a_name_or_a_number():
    """'log (folds: linear 13, log 87)' in a no-wrap column cut the measure's name and its interval at 80 columns."""
    from genbench.leaderboard.terminal import print_scores
    from genbench.scoring.scores import Scores
    from genbench.scoring.spec import MeasureScores

    items = {}
    for name in ("sharpness.mag_flatness_long", "sharpness.flatness", "baseline.hparams"):  # a baseline: no phi
        s = MeasureScores(measure=name, kind="scalar", transform="select", target="gap", n=216, dropped=0, features=1)
        s.values.update(kfold_r2=-0.0123, delta_r2=0.0021, tau=0.31)
        s.intervals.update(kfold_r2=(-0.0456, -0.0101), delta_r2=(-0.0004, 0.0051), tau=(0.21, 0.41))
        s.transform_used = {} if name.startswith("baseline.") else {"all": "log", "folds": {"linear": 13, "log": 87}}
        s.transform = "" if name.startswith("baseline.") else s.transform
        items[name] = s
    for width in (80, 120):
        out = Console(file=io.StringIO(), width=width, color_system=None)
        print_scores(out, Scores("z", "gap", items), "z", "gap")
        text = out.file.getvalue()
        assert "\u2026" not in text and max(len(line) for line in text.splitlines()) <= width, text
        assert "sharpness.mag_flatness_long" in text and "-0.01 [-0.05, -0.01]" in text
        assert {"(folds:", "linear", "13,", "87)"} <= set(text.split())  # the folds' choices, words whole


def test_the_fragility_labels_get_a_legend_where_an_entry_is_audited():
    from genbench.leaderboard.columns import FRAGILITY_LEGEND
    from site_records import _audit

    _, recs = _zoo(0.1)
    ranked = rank_records(recs)
    assert FRAGILITY_LEGEND not in view_notes(ranked, records=recs).lines()  # nothing audited: no legend
    recs[0]["audit"] = _audit("fragile-value", 0.7, 0.1)
    ranked = rank_records(recs)
    assert FRAGILITY_LEGEND in view_notes(ranked, records=recs).lines()
    for label in ("robust", "fragile-value", "fragile-trend", "fragile-scale", "data-blind", "inconclusive"):
        assert f"{label} = " in FRAGILITY_LEGEND
