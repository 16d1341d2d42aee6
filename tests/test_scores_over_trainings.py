"""Scores over trainings (issue 39 item 3): an entry scored on every training of its grid holds each training's
scores, their mean with a two-stage interval that includes the training noise, and verdicts settled when every
training agrees. The interval and the leaderboard's paired draws are checked against a brute-force loop over
draws built on scikit-learn's weighted R^2."""
from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import r2_score

import genbench as gb
from genbench.defaults import OFFICIAL_ZOOS, TRAININGS
from genbench.entries.run import run_baselines, run_entry
from genbench.entries.trainings import provisional_note, training_zoos
from genbench.errors import GenbenchError
from genbench.leaderboard.standings import paired_draws, rank_records
from genbench.leaderboard.verdict import entry_verdict, zoo_verdict
from genbench.record import Record
from genbench.scoring.resample import percentile_interval, resample_weights
from genbench.scoring.trainings import combine_draws, combine_scores, predicted, said, training_picks, verdict

N_BOOT = 200
MEASURE = "norm.fro_prod"


def test_combined_draws_are_the_mean_over_the_picked_trainings_of_each_draw():
    rng = np.random.default_rng(1)
    draws = rng.normal(size=(3, 50))
    picks = training_picks(3, 50, table_sha256="abc", seed=0)
    brute = np.array([np.mean([draws[picks[b, k], b] for k in range(3)]) for b in range(50)])
    assert np.allclose(combine_draws(draws, picks), brute)
    stacked = np.stack([draws, 2 * draws])  # several entries at once: [E, T, B]
    assert np.allclose(combine_draws(stacked, picks), np.stack([brute, 2 * brute]))
    assert (training_picks(3, 50, table_sha256="abc", seed=0) == picks).all()  # paired: the same picks every time
    assert not (training_picks(3, 50, table_sha256="abd", seed=0) == picks).all()


def test_a_mean_outside_its_interval_is_refused_and_a_missing_training_score_too():
    picks = training_picks(2, 100, table_sha256="x", seed=0)
    draws = np.stack([np.linspace(0, 1, 100), np.linspace(0, 1, 100)])
    mean, iv, why = combine_scores([0.5, 0.5], draws, picks)
    assert why is None and iv[0] <= mean <= iv[1]
    assert combine_scores([5.0, 5.0], draws, picks)[2].startswith("the mean 5 over the trainings lies outside")
    assert combine_scores([0.5, float("nan")], draws, picks)[2] == "not every training has this score"


@pytest.mark.parametrize("says, expected", [
    (["holds", "holds", "holds"], {"holds": True, "trainings": [3, 3], "open": 0, "settled": True}),
    (["fails", "fails", "fails"], {"holds": False, "trainings": [0, 3], "open": 0, "settled": True}),
    (["holds", "holds", "fails"], {"holds": True, "trainings": [2, 3], "open": 0, "settled": False}),
    (["holds", "fails", "fails"], {"holds": False, "trainings": [1, 3], "open": 0, "settled": False}),
    # not shown to hold is not shown not to: an interval containing 0 on one training leaves the absence unsettled
    (["fails", "open", "fails"], {"holds": False, "trainings": [0, 3], "open": 1, "settled": False}),
    (["open", "open", "open"], {"holds": False, "trainings": [0, 3], "open": 3, "settled": False}),
    (["holds", "holds", "open"], {"holds": True, "trainings": [2, 3], "open": 1, "settled": False}),
    (["holds"], {"holds": True, "trainings": [1, 1], "open": 0, "settled": False}),  # one training settles nothing
    (["holds", None], None),
])
def test_a_verdict_is_settled_when_two_or_more_trainings_show_the_same(says, expected):
    assert verdict(says) == expected


def test_the_next_trainings_interval_is_predicted_by_the_t_prediction_interval_of_each_end():
    ends = [[0.01, 0.05], [0.02, 0.06], [0.03, 0.07]]
    k = 4.30265273 * (4 / 3) ** 0.5  # t(0.975, 2) from a table, sqrt(1 + 1/3); both ends' sd are 0.01
    assert predicted(ends) == pytest.approx((0.02 - 0.01 * k, 0.06 + 0.01 * k), rel=1e-8)
    assert predicted([[0.01, 0.05]]) is None and predicted([[0.01, 0.05], [float("nan"), 0.1]]) is None


@pytest.mark.parametrize("T", [2, 3, 5])
def test_the_predicted_lower_end_bounds_a_new_trainings_lower_end_at_97_5_percent(T):
    """Coverage by simulation: trainings' lower ends drawn normal; a new training's lower end lies above the
    predicted bound from the T before it in 97.5% of the draws (the interval is a prediction interval, not the
    mean's, which would cover far less)."""
    rng = np.random.default_rng(T)
    lo = rng.normal(0.02, 0.01, size=(40_000, T + 1))
    bounds = np.array([predicted(np.c_[row[:T], row[:T] + 0.05])[0] for row in lo[:500]])  # the function itself
    k = stats.t.ppf(0.975, T - 1) * np.sqrt(1 + 1 / T)  # the same bound for all draws at once
    every = lo[:, :T].mean(1) - k * lo[:, :T].std(1, ddof=1)
    np.testing.assert_allclose(bounds, every[:500], rtol=1e-12)
    assert abs(np.mean(lo[:, T] >= every) - 0.975) < 0.004
    mean_bound = lo[:, :T].mean(1) - stats.t.ppf(0.975, T - 1) * lo[:, :T].std(1, ddof=1) / np.sqrt(T)
    assert np.mean(lo[:, T] >= mean_bound) < 0.965  # the mean's interval would not do


@pytest.mark.parametrize("says, ends, settled", [
    (["holds"] * 3, [[0.010, 0.03], [0.011, 0.03], [0.012, 0.03]], True),   # tight: the next starts above 0 too
    (["holds"] * 3, [[0.001, 0.03], [0.010, 0.03], [0.020, 0.03]], False),  # spread: the next may start below 0
    (["fails"] * 3, [[-0.05, -0.02], [-0.05, -0.021], [-0.05, -0.019]], True),
    (["fails"] * 3, [[-0.05, -0.001], [-0.05, -0.02], [-0.05, -0.04]], False),
    (["holds", "holds", "open"], [[0.01, 0.03], [0.01, 0.03], [-0.01, 0.03]], False),
])
def test_a_verdict_read_from_intervals_is_settled_only_when_the_next_training_is_predicted_to_show_it(says, ends,
                                                                                                     settled):
    v = verdict(says, ends)
    assert v["settled"] is settled and v["predicted"] == list(predicted(ends))
    assert verdict(says, [ends[0], None, ends[2]])["settled"] is False  # a training without an interval: no prediction


@pytest.mark.parametrize("key, kw, expected", [
    ("beats_recipe", {"vs_recipe": [0.05, 0.01, 0.09]}, "holds"),
    ("beats_recipe", {"vs_recipe": [-0.05, -0.09, -0.01]}, "fails"),
    ("beats_recipe", {"vs_recipe": [0.01, -0.02, 0.04]}, "open"),
    ("beats_recipe", {"vs_recipe": []}, None),  # no recipe to compare with
    ("adds_to_recipe", {"intervals": {"delta_r2": [0.001, 0.02]}}, "holds"),
    ("adds_to_recipe", {"intervals": {"delta_r2": [-0.02, -0.001]}}, "fails"),
    ("adds_to_recipe", {"intervals": {"delta_r2": [-0.004, 0.006]}}, "open"),
    ("adds_to_recipe", {"intervals": {"delta_r2": [0.001, 0.02]}, "refused": {"delta_r2": "too few"}}, None),
    ("against_claim", {"direction": {"claim": "larger_gap", "against": True}}, "holds"),
    ("against_claim", {"direction": {"claim": "larger_gap", "against": False}}, "fails"),
    ("against_claim", {"direction": {"claim": None, "against": True}}, None),  # no claim to check
    ("against_claim", {"direction": {}}, None),  # not checked
])
def test_each_training_says_holds_fails_or_open_by_where_its_interval_lies(key, kw, expected):
    args = {"vs_recipe": [], "intervals": {}, "refused": {}, "direction": None, **kw}
    assert said(key, **args) == expected


@pytest.fixture(scope="module")
def trained(home, digits_zoo):
    """digits-mlp and its trainings 1 and 2, with one measure and the baselines scored on all three."""
    for k in (1, 2):
        gb.build_zoo("digits-mlp", training=k, progress=False)
    zoos = training_zoos(digits_zoo, 3)
    rec = Record(run_entry(MEASURE, digits_zoo, audit_zoo=None, n_boot=N_BOOT, trainings=3))
    alone = [Record(run_entry(MEASURE, z, audit_zoo=None, n_boot=N_BOOT, trainings=1)) for z in zoos]
    base = [Record(r) for r in run_baselines(digits_zoo, only=("baseline.hparams",), n_boot=N_BOOT, trainings=3)]
    return zoos, rec, alone, base[0]


def _brute_draws(zoos, rec: Record, n_boot: int) -> np.ndarray:
    """The two-stage draws by hand: per draw, the models resampled by training 0's multiplicities, the trainings
    picked, and scikit-learn's weighted R^2 of each picked training's held-out predictions, averaged."""
    w = resample_weights(len(rec.model_ids), table_sha256=zoos[0].table_sha256, seed=0, n_boot=n_boot)
    picks = training_picks(len(zoos), n_boot, table_sha256=zoos[0].table_sha256, seed=0)
    parts = []
    for t in range(len(zoos)):
        y = np.array(rec.values["gap"] if t == 0 else rec.training_part(t)["gap"], float)
        h = np.array(rec.heldout if t == 0 else rec.training_part(t)["heldout"], float)
        parts.append((y, h))
    out = np.empty(n_boot)
    for b in range(n_boot):
        scores = []
        for t in picks[b]:
            y, h = parts[t]
            scores.append(np.mean([r2_score(y, row, sample_weight=w[b]) for row in h]))
        out[b] = np.mean(scores)
    return out


def test_the_record_holds_each_training_their_mean_and_the_brute_force_interval(trained):
    zoos, rec, alone, _ = trained
    assert rec.n_trainings == 3 and rec.training_names == [z.name for z in zoos]
    per = [rec.training_part(t)["values"]["kfold_r2"] for t in range(3)]
    # each training's point score is the one it gets scored alone (the k-fold fit does not depend on resamples)
    assert per == pytest.approx([a.scores["values"]["kfold_r2"] for a in alone], rel=1e-12)
    assert rec.score("kfold_r2") == pytest.approx(np.mean(per), rel=1e-12)
    brute = _brute_draws(zoos, rec, N_BOOT)
    assert rec.interval("kfold_r2") == pytest.approx(percentile_interval(brute), rel=1e-9, abs=1e-12)
    # the leaderboard recomputes the same draws from the record (paired groups, differences with the recipe)
    lb = paired_draws([rec], {rec.name: np.array(rec.heldout, float)}, "kfold_r2")[0]
    assert np.allclose(lb, brute, rtol=1e-9, atol=1e-12)
    # the combined interval is wider than one training's when the trainings disagree: it holds their noise
    assert rec.scores["bootstrap"]["table_sha256"] == zoos[0].table_sha256


def test_the_verdicts_are_what_each_training_says(trained):
    zoos, rec, _, _ = trained
    parts = [rec.training_part(t) for t in range(3)]

    def where(iv):  # by hand: above 0 holds, below 0 fails, else open
        return "holds" if iv[0] > 0 else "fails" if iv[1] < 0 else "open"
    adds = [where(p["intervals"]["delta_r2"]) for p in parts]
    beats = [where(p["vs_recipe"][1:]) for p in parts]
    against = ["holds" if p["against"] is True else "fails" for p in parts]
    for key, says in (("adds_to_recipe", adds), ("beats_recipe", beats), ("against_claim", against)):
        v = rec.verdicts[key]
        n = says.count("holds")
        assert v["trainings"] == [n, 3] and v["open"] == says.count("open"), key
        same = len(set(says)) == 1 and says[0] != "open"
        if key != "against_claim":  # read from intervals: the next training's predicted by hand (scipy's t)
            iv = {"adds_to_recipe": [p["intervals"]["delta_r2"] for p in parts],
                  "beats_recipe": [p["vs_recipe"][1:] for p in parts]}[key]
            lo, hi = np.array(iv).T
            k = stats.t.ppf(0.975, 2) * np.sqrt(4 / 3)
            nxt = [lo.mean() - k * lo.std(ddof=1), hi.mean() + k * hi.std(ddof=1)]
            assert v["predicted"] == pytest.approx(nxt, rel=1e-12), key
            same = same and (nxt[0] > 0 if says[0] == "holds" else nxt[1] < 0)
        assert v["settled"] == same, key
        assert v["holds"] == (2 * n > 3), key


def test_the_views_say_over_how_many_trainings_a_verdict_holds(trained):
    zoos, rec, _, base = trained
    ranked = rank_records([rec.data, base.data])
    v = zoo_verdict(zoos[0].name, ranked)
    text = v.sentence()
    v_adds = rec.verdicts["adds_to_recipe"]
    held, of = v_adds["trainings"]
    assert f"on {held} of {of} trainings, {'settled' if v_adds['settled'] else 'unsettled'}" in text
    lines = entry_verdict(rec, ranked)
    each = ", ".join(f"{rec.training_part(t)['values']['kfold_r2']:.3f}" for t in range(3))
    assert f"mean over 3 trainings: {each}" in lines[0]
    assert v.difference is not None  # the recipe pairs with the entry over the three trainings


def test_a_missing_training_is_refused_with_the_command_that_builds_it(digits_zoo):
    with pytest.raises(GenbenchError, match=r"digits-mlp-t7.*genbench zoo build digits-mlp --training 7"):
        training_zoos(digits_zoo, 8)


def test_records_on_different_numbers_of_trainings_rank_without_pairing_the_provisional_one(trained):
    zoos, rec, alone, base = trained
    ranked = rank_records([rec.data, base.data, {**alone[0].data, "name": "one-training"}])
    mine = {r.name: r for r in ranked}
    assert mine[MEASURE].rank_group is not None and mine["one-training"].rank_group is None
    assert mine["one-training"].rank is not None
    # the entries grouped are those scored on what most entries are: a lone entry on three trainings among entries
    # on one (the shipped records before they are regenerated) is ranked without a group, and says why
    one = alone[0].data
    shifted = {**one["values"], "heldout": [[None if v is None else v + 1e-3 for v in row]
                                            for row in one["values"]["heldout"]]}
    ones = [{**one, "name": "one-0"}, {**one, "name": "one-1", "values": shifted}]  # two entries, not one shown twice
    ranked = rank_records([rec.data, *ones])
    mine = {r.name: r for r in ranked}
    assert mine[MEASURE].rank_group is None and all(mine[f"one-{i}"].rank_group is not None for i in range(2))
    assert "no group (scored on 3 training(s), the grouped entries on 1)" in entry_verdict(rec, ranked)[0]


def test_an_official_entry_on_fewer_trainings_is_provisional_with_the_command_that_completes_it():
    zoo = OFFICIAL_ZOOS[0]
    note = provisional_note(zoo, 1, command=f"genbench leaderboard run X --zoo {zoo}")
    assert note.startswith(f"provisional: scored on 1 of the {TRAININGS} trainings")
    assert f"genbench zoo build {zoo} --training 1" in note and note.endswith(f"then again: genbench leaderboard run X --zoo {zoo}")
    assert provisional_note(zoo, TRAININGS, command="x") is None and provisional_note("digits-mlp", 1, command="x") is None
    assert Record({"zoo": {"name": zoo}, "status": "ok", "trainings": {}}).provisional
    assert not Record({"zoo": {"name": zoo}, "status": "ok", "trainings": {"zoos": [{}] * TRAININGS}}).provisional
    assert not Record({"zoo": {"name": zoo}, "status": "failed"}).provisional  # a failed record is not ranked at all


def test_the_verdict_sets_the_private_score_beside_the_public_one_and_flags_a_drop_beyond_the_training_noise(trained):
    from genbench.leaderboard.verdict import training_noise
    zoos, rec, _, base = trained
    per = [rec.training_part(t)["values"]["kfold_r2"] for t in range(3)]
    assert training_noise([rec, base]) == pytest.approx(2 * np.median(
        [np.std(per, ddof=1), np.std([base.training_part(t)["values"]["kfold_r2"] for t in range(3)], ddof=1)]))
    public = rec.score("kfold_r2")
    block = {"zoo": "digits-mlp-private", "commitment": "0" * 64, "status": "ok", "n": 24, "date": "",
             "scores": {"values": {"kfold_r2": public - 0.5}, "intervals": {}, "refused": {}}}
    low = Record({**rec.data, "private": block})
    text = zoo_verdict(zoos[0].name, rank_records([low.data, base.data])).sentence()
    assert f"on the private training: {MEASURE} " in text and "does not hold on the private training" in text
    near = Record({**rec.data, "private": {**block, "scores": {"values": {"kfold_r2": public}}}})
    text = zoo_verdict(zoos[0].name, rank_records([near.data, base.data])).sentence()
    assert "on the private training" in text and "does not hold" not in text
    lines = entry_verdict(low, rank_records([low.data, base.data]))
    assert lines[-1].startswith("private training (digits-mlp-private): k-fold R\u00b2 ")


def test_rescoring_a_record_over_trainings_remakes_each_training_and_their_combination(trained, tmp_path):
    from genbench.entries.rescore import rescore_baselines, rescore_record
    zoos, rec, _, base = trained
    again = rescore_record(rec.data, zoos[0])
    assert again["scores"]["verdicts"] == rec.verdicts
    for t in range(3):
        assert again["trainings"]["zoos"][t]["values"] == pytest.approx(rec.training_part(t)["values"], rel=1e-9)
    ivs = rec.trainings["combined"]["intervals"]
    assert {k: tuple(v) for k, v in again["trainings"]["combined"]["intervals"].items()} == {
        k: pytest.approx(tuple(v), rel=1e-9) for k, v in ivs.items()}
    b = rescore_baselines(zoos[0], {base.name: base.data}, tmp_path)[0]
    assert b["trainings"]["combined"]["values"] == pytest.approx(base.trainings["combined"]["values"], rel=1e-9)
    planted = {**rec.data, "trainings": {**rec.trainings, "zoos": [rec.training_part(0),
                                                                  {**rec.training_part(1), "table_sha256": "0" * 64}]}}
    with pytest.raises(GenbenchError, match="is not the training the record was scored on"):
        rescore_record(planted, zoos[0])


def test_leaderboard_run_scores_on_the_trainings_asked_for_and_refuses_missing_ones_in_one_line(trained, tmp_path):
    from typer.testing import CliRunner

    from genbench.cli import app
    out = tmp_path / "results"
    res = CliRunner().invoke(app, ["leaderboard", "run", MEASURE, "--zoo", "digits-mlp", "--trainings", "3",
                                   "--no-audit", "--no-baselines", "--n-boot", str(N_BOOT), "--results",
                                   str(out)])
    assert res.exit_code == 0, res.output
    for training in ("digits-mlp", "digits-mlp-t1", "digits-mlp-t2"):  # progress inside the entry, per training
        assert f"\revaluate {training}: " in res.output
    assert re.search(rf"[\r\n]digits-mlp {MEASURE}: ok", res.output)  # its line starts a line, not after a bar
    rec = Record.read(out / "digits-mlp" / f"{MEASURE}.json")
    assert rec.n_trainings == 3 and rec.audit is None and rec.provenance["audit_zoo"] is None
    assert rec.provenance["command"] == f"genbench leaderboard run {MEASURE} --zoo digits-mlp --no-audit --n-boot {N_BOOT} " \
                                        "--trainings 3"
    assert rec.score("kfold_r2") == pytest.approx(trained[1].score("kfold_r2"), rel=1e-12)
    res = CliRunner().invoke(app, ["leaderboard", "run", MEASURE, "--zoo", "digits-mlp", "--trainings", "5",
                                   "--audit-zoo", "", "--results", str(tmp_path / "none")])
    assert isinstance(res.exception, GenbenchError)  # main() prints it as one line
    assert "genbench zoo build digits-mlp --training 3" in str(res.exception)
    assert not (tmp_path / "none").exists()  # refused before any record was made


def test_verify_of_a_record_whose_trainings_are_not_built_here_says_to_build_them(trained, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import genbench.entries.trainings as trainings_module
    from genbench.cli import app
    from genbench.entries.verify import verify_record
    from genbench.record import write_record
    path = write_record(trained[1].data, tmp_path)
    real = trainings_module.load_zoo

    def without_t2(name, *a, **k):  # training 2 of the grid not built here
        if name == "digits-mlp-t2":
            raise GenbenchError("unknown zoo 'digits-mlp-t2'")
        return real(name, *a, **k)

    monkeypatch.setattr(trainings_module, "load_zoo", without_t2)
    v = verify_record(path, scores_only=True)
    assert not v.differences and v.problems == [
        "the record is scored on trainings that are not built (completely) here: digits-mlp-t2; build them "
        "(genbench zoo build digits-mlp --training 2), then verify it again"]
    out = CliRunner().invoke(app, ["verify", str(path), "--scores-only"])
    assert out.exit_code == 1 and "cannot verify" in out.output and "does not reproduce" not in out.output


def test_beating_the_recipe_on_a_training_compares_with_baseline_hparams_on_that_training(trained):
    zoos, rec, _, base = trained
    # made through the API with a count of trainings and resamples that are not the defaults: its command says both
    assert base.provenance["command"] == f"genbench leaderboard baselines --zoo digits-mlp --n-boot {N_BOOT} --trainings 3"
    assert rec.provenance["command"] == f"genbench leaderboard run {MEASURE} --zoo digits-mlp --no-audit --n-boot " \
                                        f"{N_BOOT} --trainings 3"
    for t in range(3):
        point = rec.training_part(t)["vs_recipe"][0]
        mine, recipe = rec.training_part(t)["values"]["kfold_r2"], base.training_part(t)["values"]["kfold_r2"]
        assert point == pytest.approx(mine - recipe, rel=1e-9, abs=1e-12), t


def test_the_paired_group_is_a_verdict_too_settled_when_each_training_groups_an_entry_the_same(trained):
    from genbench.leaderboard.export import view_notes
    from genbench.leaderboard.standings import _one_training_draws, _weights
    from genbench.scoring.resample import paired_groups
    zoos, rec, alone, base = trained
    ranked = [r for r in rank_records([rec.data, base.data]) if r.rank_group is not None]
    # brute force: each training's own records (scored alone, but on training 0's resamples) grouped by its draws
    w = _weights(len(rec.model_ids), zoos[0].table_sha256, 0, N_BOOT)
    expected = {r.name: 0 for r in ranked}
    for t in range(3):
        parts = [(np.array(r.values["gap"] if t == 0 else r.training_part(t)["gap"], float),
                  np.array(r.heldout if t == 0 else r.training_part(t)["heldout"], float)) for r in ranked]
        points = [r.training_part(t)["values"]["kfold_r2"] for r in ranked]
        order = sorted(range(len(ranked)), key=lambda i: -points[i])
        groups = paired_groups([points[i] for i in order], _one_training_draws(parts, w, "kfold_r2")[order])
        for i, g in zip(order, groups):
            expected[ranked[i].name] += g == ranked[i].rank_group
    assert {r.name: r.group_trainings for r in ranked} == {n: [h, 3] for n, h in expected.items()}
    lines = view_notes(ranked).zoo_lines(zoos[0].name)
    said = [line for line in lines if line.startswith("rank groups over 3 trainings: ")]
    assert len(said) == 1
    import html

    from genbench.leaderboard.site import index_page
    page = index_page({zoos[0].name: ranked}, {(zoos[0].name, i): f"e{i}.html" for i in range(len(ranked))}, None,
                      "t")
    assert html.escape(said[0]) in page  # the page says it as the terminal does


def test_a_submissions_later_trainings_are_said_as_scoring_and_the_audit_as_the_audit():
    from types import SimpleNamespace

    from genbench.entries.submit.executor import SandboxExecutor
    ex = SandboxExecutor(worker=None, job=None, m=SimpleNamespace(name="x.m"), check_models=2)
    said = []
    ex.run = lambda zoo, mid, measures, **kw: said.append(ex._stage(zoo, kw.get("single", True))) or {}

    class Z(list):
        def __init__(self, name):
            super().__init__(["a"])
            self.name = name

    ex.phase = "score"
    for name in ("demogen-nin-mnist1d", "demogen-nin-mnist1d-t1", "demogen-nin-mnist1d-t2", "fragility-cnn-mnist1d"):
        list(ex.evaluate(Z(name), ["a"], [], None, device="cpu", seed=0, budget_s=None))
    assert said == ["evaluating x.m on 1 models on demogen-nin-mnist1d", "evaluating x.m on 1 models on "
                    "demogen-nin-mnist1d-t1", "evaluating x.m on 1 models on demogen-nin-mnist1d-t2",
                    "evaluating x.m for the fragility audit (1 models) on fragility-cnn-mnist1d"]


def test_a_copy_of_an_entry_is_told_it_is_shown_as_the_entrys_alias(trained):
    zoos, rec, _, base = trained
    copy = {**rec.data, "name": "copy", "builtin": False, "submission": {"folder": "copy"}}
    ranked = rank_records([rec.data, copy, base.data])
    assert [r.name for r in ranked if "copy" in r.aliases] == [MEASURE]
    line = entry_verdict(Record(copy), ranked)[0]
    assert line.startswith(f"the same entry as {MEASURE} (identical held-out predictions and scores)")


def test_the_table_marks_against_its_claim_as_the_verdict_over_trainings_says(trained):
    from genbench.leaderboard.export import AGAINST, claim_text
    zoos, rec, _, _ = trained
    parts = [{**rec.training_part(t), "against": t > 0} for t in range(3)]  # against on 2 of 3 trainings, not on 0
    data = {**rec.data, "trainings": {**rec.trainings, "zoos": parts},
            "scores": {**rec.scores, "direction": {**rec.direction, "against": False},
                       "verdicts": {"against_claim": {"holds": True, "trainings": [2, 3], "settled": False}}}}
    assert Record(data).against_claim and claim_text(Record(data)) == AGAINST


def test_an_absence_not_shown_on_every_training_reads_unsettled_with_where_it_is_open(trained):
    from genbench.leaderboard.verdict import over
    _, rec, _, _ = trained
    open_v = {"holds": False, "trainings": [0, 3], "open": 2, "settled": False}
    shown = {"holds": False, "trainings": [0, 3], "open": 0, "settled": True}
    spread = {"holds": True, "trainings": [3, 3], "open": 0, "settled": False, "predicted": [-0.0021, 0.041]}
    for v, text in ((open_v, "on 0 of 3 trainings, unsettled: its interval contains 0 on 2"),
                    (shown, "on 0 of 3 trainings, settled"),
                    (spread, "on 3 of 3 trainings, unsettled: a new training's interval is predicted within "
                             "[-0.002, 0.041], which contains 0")):
        data = {**rec.data, "scores": {**rec.scores, "verdicts": {"adds_to_recipe": v}}}
        assert over(Record(data), "adds_to_recipe") == text
    old = {k: v for k, v in shown.items() if k != "open"}  # a record written before the count: none open
    data = {**rec.data, "scores": {**rec.scores, "verdicts": {"adds_to_recipe": old}}}
    assert Record(data).verdict_over("adds_to_recipe")["open"] == 0
