"""Batched flatness searches (issue 41): the PAC-Bayes and sharpness searches of a shape group of models in one
stacked forward give every model its per-model value, and the harness's hook for batched implementations (shape
groups, the value cache, per-model failures, the conformance check)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import genbench as gb
from genbench.harness import check_measure
from genbench.harness.evaluate import evaluate_group, shape_key, validate_value
from genbench.harness.executor import Executor
from genbench.measures import batched as batched_module

SEARCH_MEASURES = ["pacbayes.flatness", "pacbayes.mag_flatness", "sharpness.flatness", "sharpness.mag_flatness"]


@pytest.fixture
def stacks(monkeypatch):
    """Records the number of models of every stack the batched searches run."""
    sizes = []
    real = batched_module.run_searches

    def spy(stack, searches, check=lambda: None):
        sizes.append(len(searches))
        return real(stack, searches, check)

    monkeypatch.setattr(batched_module, "run_searches", spy)
    return sizes


def both_paths(zoo, names, tmp_path, ids=None):
    """The value tables of `names` on `zoo` one model at a time and with the batched implementations."""
    per = gb.evaluate(names, zoo, models=ids, cache=False, executor=Executor(batch=False), progress=False)
    bat = gb.evaluate(names, zoo, models=ids, cache=False, progress=False)
    return per, bat


@pytest.mark.parametrize("zoo_name", ["digits_zoo", "nin_zoo"])
def test_batched_searches_give_every_model_its_per_model_value(zoo_name, request, tmp_path, stacks):
    """An MLP zoo (Linear layers: the stacked products are the per-model ones) and a conv zoo (NiN in 1-D)."""
    zoo = request.getfixturevalue(zoo_name)
    ids = zoo.model_ids[:8]
    per, bat = both_paths(zoo, SEARCH_MEASURES, tmp_path, ids)
    groups = {}
    for mid in ids:
        groups.setdefault(shape_key(zoo.load_model(mid)), []).append(mid)
    stacked = sorted(len(g) for g in groups.values() if len(g) >= 2)
    assert stacked and sorted(stacks) == sorted(stacked * len(SEARCH_MEASURES))  # one stack per shape and search
    for name in SEARCH_MEASURES:
        assert per[f"{name}:error"].isna().all() and bat[f"{name}:error"].isna().all()
        assert per[name].tolist() == bat[name].tolist(), name  # the searches' decisions identical: equal radii


def test_a_drop_acts_on_the_radius_search_only_through_its_decision_class():
    """radius_steps, driven with drops and again with other drops of the same radius_decision class, asks for the
    same radii and returns the same one: what lets a batched pass stop counting once the class is fixed."""
    from genbench.measures.batched import radius_decision
    from genbench.measures.pacbayes import TARGET_DROP, TOLERANCE, radius_steps

    rng = np.random.default_rng(0)
    edges = [TARGET_DROP - TOLERANCE, TARGET_DROP, TARGET_DROP + TOLERANCE]
    pool = np.concatenate([rng.uniform(0, 1, 400), rng.uniform(0.08, 0.12, 400), edges,
                           np.nextafter(edges, 0), np.nextafter(edges, 1)])
    by_class = {}
    for d in pool:
        by_class.setdefault(radius_decision(float(d)), []).append(float(d))
    assert sorted(by_class) == [0, 1, 2, 3]
    for d in pool:  # the classes lie in order along d
        assert all(radius_decision(float(d)) <= radius_decision(e) for e in pool[pool > d][:50])

    def drive(drops):
        steps, asked = radius_steps(), []
        r = next(steps)
        try:
            while True:
                asked.append(r)
                r = steps.send(drops(len(asked), r))
        except StopIteration as done:
            return asked, done.value

    for trial in range(300):
        plan = rng.integers(0, 4, 40)
        if trial % 3 == 0:  # monotone-ish: far too much noise at large radii
            plan = np.array([3] * 4 + list(rng.integers(0, 4, 36)))
        first = drive(lambda k, r: by_class[plan[k - 1]][0])
        other = drive(lambda k, r: by_class[plan[k - 1]][int(rng.integers(len(by_class[plan[k - 1]])))])
        assert first == other


def test_a_batched_accuracy_pass_stops_counting_once_the_decision_is_fixed(digits_zoo, monkeypatch):
    """FlatStack.accuracies with a request's decision: rows whose decision the examples left cannot change skip
    the batches left and get the accuracies that count those examples as wrong; the others are counted in full."""
    from genbench.measures.batched import FlatStack
    from genbench.measures.pacbayes import FlatModel

    monkeypatch.setattr(batched_module, "EVAL_BATCH", 100)
    ids = digits_zoo.model_ids[:2]
    x, y = digits_zoo.train_data(ids[0])
    x, y = x[:400], y[:400]
    fms = [FlatModel(digits_zoo.load_model(mid).eval()) for mid in ids]
    stack = FlatStack(fms, [x, x], [y, y])
    gen = np.random.default_rng(1)
    flats = torch.stack([fms[k].w + float(s) * torch.as_tensor(gen.standard_normal(fms[k].w.numel()),
                                                                  dtype=fms[k].w.dtype)
                         for k in (0, 0, 1, 1) for s in (0.0, 3.0)])
    owners = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    full = stack.accuracies(owners, flats)
    assert full == [fms[int(k)].accuracy(f, x, y) for k, f in zip(owners, flats)]
    passes = []
    real = stack._forward

    def counted(n):
        fwd = real(n)

        def call(p, xx):
            passes.append((n, xx.shape[1]))
            return fwd(p, xx)
        return call

    monkeypatch.setattr(stack, "_forward", counted)
    never = lambda accs: tuple(accs)  # noqa: E731 - any count changes it: every row counted in full
    always = lambda accs: 0  # noqa: E731 - fixed from the start: one batch, then the rows stop
    same = stack.accuracies(owners, flats, [(0, 4, never), (4, 8, never)])
    assert same == full and sum(n for n, _ in passes) == 8 * 4
    passes.clear()
    early = stack.accuracies(owners, flats, [(0, 4, always), (4, 8, None)])
    assert early[4:] == full[4:]
    assert early[:4] != full[:4]
    assert sum(n for n, _ in passes) == 4 * 4 + 4  # the first request's rows: the first batch only
    for a, k, f in zip(early[:4], owners[:4], flats[:4]):  # what they got: the first batch's hits over all examples
        assert a == fms[int(k)].accuracy(f, x, torch.where(torch.arange(400) < 100, y, -1))


@pytest.mark.parametrize("zoo_name", ["digits_zoo", "nin_zoo"])
def test_gaussian_searches_that_stop_counting_early_keep_every_models_value(zoo_name, request, tmp_path,
                                                                           monkeypatch):
    """With the training subsample passed in batches of 100, many of the PAC-Bayes searches' accuracy rounds stop
    counting before the last batch (their accuracies then differ from the full counts), and every model keeps its
    per-model value."""
    zoo = request.getfixturevalue(zoo_name)
    ids = zoo.model_ids[:6]
    names = ["pacbayes.flatness", "pacbayes.mag_flatness"]
    per = gb.evaluate(names, zoo, models=ids, cache=False, executor=Executor(batch=False), progress=False)
    monkeypatch.setattr(batched_module, "EVAL_BATCH", 100)
    real, rows = batched_module.FlatStack.accuracies, {"all": 0, "stopped": 0}

    def spy(self, owners, flats, decisions=()):
        out = real(self, owners, flats, decisions)
        full = real(self, owners, flats)
        rows["all"] += len(out)
        rows["stopped"] += sum(a != b for a, b in zip(out, full))
        return out

    monkeypatch.setattr(batched_module.FlatStack, "accuracies", spy)
    bat = gb.evaluate(names, zoo, models=ids, cache=False, progress=False)
    assert 0 < rows["stopped"] < rows["all"]
    for name in names:
        assert per[f"{name}:error"].isna().all() and per[name].tolist() == bat[name].tolist(), name


class _Autograd(dict):
    """A FlatStack's gradient nets with none for any stack size: its gradients go through autograd."""

    def __contains__(self, n):
        return True

    def __getitem__(self, n):
        return None


def test_the_sharpness_gradients_of_a_nin_stack_are_hand_written_and_agree_with_autograd(nin_zoo, monkeypatch):
    """The sharpness searches' gradient on a stacked 1-D NiN uses the family's hand-written backward
    (StackedSignals.loss_gradient: no autograd graph); on every round of the searches it gives autograd's gradient
    through the stacked forward (rtol 1e-4: another summation order) and the same training accuracy, also when the
    training subsample is passed in several chunks."""
    from genbench.models.stacked_signals import StackedSignals

    real, calls, rounds = batched_module.FlatStack.gradients, [], []
    real_lg = StackedSignals.loss_gradient

    def counted(self, *a, **kw):
        calls.append(1)
        return real_lg(self, *a, **kw)

    def both(self, owners, us):
        hand = real(self, owners, us)
        kept, self._gradients = self._gradients, _Autograd()
        ref = real(self, owners, us)
        self._gradients = kept
        for (g, acc), (g_ref, acc_ref) in zip(hand, ref):
            assert acc == acc_ref
            np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-4, atol=1e-7 * float(g_ref.abs().max()))
        rounds.append(len(hand))
        return hand

    monkeypatch.setattr(StackedSignals, "loss_gradient", counted)
    monkeypatch.setattr(batched_module.FlatStack, "gradients", both)
    monkeypatch.setattr(batched_module, "EVAL_BATCH", 150)  # several chunks, the last one short: each scaled by 1/m
    df = gb.evaluate(["sharpness.flatness"], nin_zoo, models=nin_zoo.model_ids[:4], cache=False, progress=False)
    assert df["sharpness.flatness:error"].isna().all()
    assert rounds and calls  # the searches asked for gradients, and the hand-written pass answered them


def test_the_bounds_that_share_a_search_reuse_the_batched_one(digits_zoo, tmp_path, stacks):
    """pacbayes.init / orig / flatness share one sigma search per model: one stack per shape group for all three."""
    ids = digits_zoo.model_ids[:6]
    per, bat = both_paths(digits_zoo, ["pacbayes.init", "pacbayes.orig", "pacbayes.flatness"], tmp_path, ids)
    for name in ["pacbayes.init", "pacbayes.orig", "pacbayes.flatness"]:
        assert per[name].tolist() == bat[name].tolist()
    assert len(stacks) == len({shape_key(digits_zoo.load_model(mid)) for mid in ids})


def test_the_harness_groups_by_shape_skips_cached_models_and_keeps_failures_per_model(digits_zoo, tmp_path,
                                                                                     temp_measures):
    seen = []

    def prepare(ctxs):
        seen.append(sorted(c.model.config["width"] for c in ctxs))
        assert len({shape_key(c.model) for c in ctxs}) == 1
        for c in ctxs:
            c.memo("test.work", lambda c=c: float(c.model.config["width"]))

    @temp_measures("test.grouped", batched=prepare)
    def grouped(ctx):
        """The width, from the batched work when it was done (else it fails, as a broken model would)."""
        if not ctx.has_memo("test.work"):
            raise RuntimeError("no batched work")
        return ctx.memo("test.work", lambda: math.nan)

    ids = digits_zoo.model_ids[:12]
    df = gb.evaluate("test.grouped", digits_zoo, models=ids, cache=tmp_path / "c", progress=False)
    widths = [digits_zoo.load_model(mid).config["width"] for mid in ids]
    assert df["test.grouped"].tolist() == [float(w) for w in widths]
    assert sum(len(s) for s in seen) == len(ids) and all(len(set(s)) == 1 for s in seen)
    seen.clear()
    df = gb.evaluate("test.grouped", digits_zoo, models=digits_zoo.model_ids[:13], cache=tmp_path / "c",
                     progress=False)
    assert df.attrs["cached"]["test.grouped"] == 12  # cached models are not stacked again: one model left, alone
    assert seen == [] and df["test.grouped:error"].iloc[12] == "RuntimeError: no batched work"


def test_a_failing_batched_run_falls_back_to_each_models_own_call(digits_zoo, tmp_path, temp_measures):
    def prepare(ctxs):
        raise MemoryError("the stack does not fit")

    @temp_measures("test.fallback", batched=prepare)
    def fallback(ctx):
        """Fails on one model, works on the others."""
        if ctx.model.config["width"] == 32:
            raise RuntimeError("this model only")
        return 1.0

    ids = digits_zoo.model_ids[::2]
    df = gb.evaluate("test.fallback", digits_zoo, models=ids, cache=False, progress=False)
    widths = [digits_zoo.load_model(mid).config["width"] for mid in ids]
    assert set(widths) == {16, 32}
    errors = [e if isinstance(e, str) else None for e in df["test.fallback:error"]]
    assert df["test.fallback"].fillna(0).tolist() == [0.0 if w == 32 else 1.0 for w in widths]
    assert errors == [("RuntimeError: this model only" if w == 32 else None) for w in widths]


def test_the_conformance_suite_catches_a_batched_implementation_that_disagrees(digits_zoo, temp_measures):
    def wrong(ctxs):
        for c in ctxs:
            c.memo("test.width", lambda: 1.0)

    @temp_measures("test.disagrees", batched=wrong)
    def disagrees(ctx):
        """The width per model; the batched implementation says 1."""
        return ctx.memo("test.width", lambda: float(ctx.model.config["width"]))

    report = check_measure("test.disagrees", digits_zoo)
    failed = [r for r in report.results if not r.passed]
    assert [r.name for r in failed] == ["batched implementation gives the per-model values (rtol 1e-05)"]
    assert "per model" in failed[0].message and "batched" in failed[0].message
    report = check_measure("pacbayes.flatness", digits_zoo)
    assert report.passed and "models stacked" in str(report)


def test_batched_must_be_a_function(temp_measures):
    with pytest.raises(gb.GenbenchError, match="batched must be a function"):
        temp_measures("test.notfn", batched=3)


def test_a_measure_returning_none_is_named_as_such(digits_zoo, temp_measures):
    @temp_measures("test.none")
    def none(ctx):
        """Forgets to return."""

    m = gb.get_measure("test.none")
    assert validate_value(m, None) == (None, "returned None (a `return` forgotten?); a measure must return a finite "
                                         "number or array")
    df = gb.evaluate("test.none", digits_zoo, models=digits_zoo.model_ids[:2], cache=False, progress=False)
    assert (df["test.none:error"] == "returned None (a `return` forgotten?); a measure must return a finite number "
                                     "or array").all()
    assert "non-finite" in validate_value(m, np.nan)[1]
    # np.asarray reads "1.5" as 1.5 and True as 1.0: neither is a measure's value
    for out in ("1.5", b"2"):
        assert validate_value(m, out)[1].startswith("returned a string (")
    for out in (True, np.bool_(False), np.array([True]), torch.tensor(True)):
        assert validate_value(m, out) == (None, "returned a boolean (True/False); a measure must return a finite "
                                                "number or array")
    for out, value in ((1.5, 1.5), (np.float32(2), 2.0), (torch.tensor(3.0), 3.0), (np.int64(4), 4.0)):
        assert validate_value(m, out) == (value, None)


def test_evaluate_group_loads_each_model_once_and_reports_unloadable_ones(digits_zoo, monkeypatch):
    import importlib
    ev = importlib.import_module("genbench.harness.evaluate")
    real, loads = ev._load, []

    def load(zoo, mid, **kw):
        loads.append(mid)
        return (None, None, "could not load model 'x': planted") if mid == "x" else real(zoo, mid, **kw)

    monkeypatch.setattr(ev, "_load", load)
    m = gb.get_measure("pacbayes.flatness")
    ids = digits_zoo.model_ids[:3]
    out = evaluate_group(digits_zoo, {**{mid: [m] for mid in ids}, "x": [m]})
    assert sorted(loads) == sorted([*ids, "x"])
    assert out["x"]["pacbayes.flatness"]["error"] == "could not load model 'x': planted"
    assert all(out[mid]["pacbayes.flatness"]["error"] is None for mid in ids)
