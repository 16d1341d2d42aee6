"""The views a new user meets (issue 40): tied scores share a rank, the default leaderboard fits a screen, --mine,
--html without the table, the help in the order of the work with flags read as flags, nothing cut at 80 or 68
columns, and an unwritable GENBENCH_HOME refused before any work. Built from the shipped records (no zoo)."""
from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.defaults import OFFICIAL_ZOOS

SHIPPED = Path(__file__).resolve().parent.parent / "leaderboard" / "results"
ZOOS = sorted(p.name for p in SHIPPED.iterdir() if p.is_dir())
COMMANDS = [[], ["zoo"], ["measures"], ["measures", "list"], ["measures", "check"], ["evaluate"], ["score"],
            ["audit"], ["submit"], ["leaderboard"], ["verify"]]


@pytest.fixture(scope="module")
def shipped():
    from genbench.record import load_records
    return load_records(SHIPPED)


def run(monkeypatch, args, width, home=None):
    """`genbench ARGS` at `width` columns (the console and typer's help), with its own GENBENCH_HOME."""
    import typer.rich_utils

    import genbench.cli as cli
    monkeypatch.setattr(cli.console, "width", width)
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", width)
    if home is not None:
        monkeypatch.setenv("GENBENCH_HOME", str(home))
    return CliRunner().invoke(app, args)


def test_tied_scores_share_a_rank_never_an_alphabetical_one(shipped):
    from genbench.leaderboard.export import leaderboard_table, rank_cell
    from genbench.leaderboard.standings import rank_records

    ranked = [r for r in rank_records(shipped) if r.zoo_name == "mnist1d-demogen" and r.rank is not None]
    scores = [r.score("kfold_r2") for r in ranked]
    for r, s in zip(ranked, scores):  # competition ranking, counted by brute force: 1 + measures strictly better
        assert r.rank == 1 + sum(t > s for t in scores), r.name
    ties = [r for r in ranked if scores.count(r.score("kfold_r2")) > 1]
    assert len(ties) >= 20 and len({r.rank for r in ties}) < len(ties)  # the planted case: ranks 22-45 were a tie
    assert all(r.data.get("rank_tied") is True for r in ties)
    assert not any(r.data.get("rank_tied") for r in ranked if r not in ties)
    table = leaderboard_table(shipped, ranked=rank_records(shipped))
    part = table[(table["zoo"] == "mnist1d-demogen") & table["rank"].notna()]
    shown = {e: rank_cell(r) for e, (_, r) in zip(part["entry"], part.iterrows())}
    first = int(min(r.rank for r in ties))
    assert shown["init.dist_fro"] == shown["norm.path"] == f"={first}"
    assert shown["sharpness.orig"] == str(first - 1)  # the one above the tie keeps its own rank, unmarked


def test_places_and_mean_ranks_have_one_decimal():
    from genbench.leaderboard.format import rank_text
    assert rank_text(17.5) == "17.5" and rank_text(3.0) == "3" and rank_text(None) == "-"
    assert rank_text(2.25) == f"{2.25:.1f}"


def test_default_view_is_the_official_zoos_and_fits_a_screen(monkeypatch, tmp_path):
    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED)], 200, tmp_path)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert len(lines) <= 80 and max(len(line) for line in lines) <= 200  # it was 584 lines
    for z in OFFICIAL_ZOOS:
        assert f"{z}: " in out.output  # its verdict
    others = [z for z in ZOOS if z not in OFFICIAL_ZOOS]
    assert others and not any(f"{z}: ranked by" in out.output for z in others)
    assert "--all shows every zoo" in out.output
    # the key names the audit zoo of the zoos shown, once: both official zoos are audited on the CNN audit zoo (the
    # MLP zoos' records, audited on mnist1d-fragility, are not shown)
    assert out.output.count("fragility (audited on fragility-cnn-mnist1d):") == 1
    rows = [line for line in lines if line.startswith("margin.sf_log ")]
    assert len(rows) == 1 and re.search(r" db .* db ", rows[0])  # both zoos' fragility on its one line
    assert "fragile-value =" not in out.output  # the long legend only with --explain
    assert "--explain says what each means" in out.output
    long = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--explain"], 200, tmp_path)
    assert "fragile-value = its value moves" in long.output and "--explain says" not in long.output
    assert long.output.startswith(out.output.split("fragility (audited")[0])  # the same view, the long legend added
    assert "mean: mean of the per-zoo ranks" in " ".join(long.output.split())
    every = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--all"], 200, tmp_path)
    assert all(f"{z}" in every.output for z in ZOOS) and len(every.output.splitlines()) > 200
    assert "fragile-value = its value moves" in every.output and "--explain says" not in every.output


def test_a_local_record_with_the_scores_of_an_audited_shipped_one_does_not_hide_its_audit(monkeypatch, tmp_path):
    """A built-in run again where its audit zoo is not built holds the shipped scores without the audit: the shipped
    record stays shown; a local record with other scores replaces it; one note per zoo says which, only for the zoo
    shown."""
    mine = tmp_path / "mine" / "mnist1d-demogen"
    mine.mkdir(parents=True)
    names = ("norm.fro_prod", "norm.fro_sum", "norm.params")
    for name in names:
        rec = json.loads((SHIPPED / "mnist1d-demogen" / f"{name}.json").read_text())
        assert rec["audit"]["verdict"]  # the plant needs audited shipped records
        rec["audit"] = None
        if name == "norm.params":  # other scores: the user's own result, shown
            rec["scores"]["values"]["kfold_r2"] += 1e-3
        (mine / f"{name}.json").write_text(json.dumps(rec))
    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(tmp_path / "mine"), "--zoo",
                            "mnist1d-demogen", "--format", "csv"], 200, tmp_path)
    assert out.exit_code == 0, out.output
    got = pd.read_csv(io.StringIO(out.stdout)).set_index("entry")
    assert not got.loc["norm.fro_prod", "local"] and got.loc["norm.fro_prod", "fragility"] != "not audited"
    assert got.loc["norm.params", "local"] and got.loc["norm.params", "fragility"] == "not audited"
    said = " ".join(out.stderr.split())
    assert said.count("note: on mnist1d-demogen") == 2
    assert (f"note: on mnist1d-demogen, the records of norm.fro_prod, norm.fro_sum in {tmp_path / 'mine'} have the "
            "scores of the audited records shown in their place (theirs are not audited)") in said
    assert f"note: on mnist1d-demogen, the record of norm.params in {tmp_path / 'mine'} replaces the one in " in said
    other = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(tmp_path / "mine"), "--zoo",
                              "demogen-nin-mnist1d", "--format", "csv"], 200, tmp_path)
    assert other.exit_code == 0 and "mnist1d-demogen" not in other.stderr
    # --mine where the user's only record repeats a shipped one: it said "no local records", with one in the folder
    home = tmp_path / "home"
    (home / "results" / "mnist1d-demogen").mkdir(parents=True)
    shutil.copy(mine / "norm.fro_prod.json", home / "results" / "mnist1d-demogen")
    said = " ".join(run(monkeypatch, ["leaderboard", "--mine"], 200, home).output.split())
    assert (f"no local records shown: your 1 record(s) in {home / 'results'} repeat shipped records (shown in their "
            "place) or could not be read (the notes above say which)") in said, said


def test_mine_shows_only_the_users_records(monkeypatch, tmp_path):
    mine = tmp_path / "mine"
    src = json.loads((SHIPPED / "mnist1d-demogen" / "margin.h1.json").read_text())
    src.update(name="my_entry", measure="my_entry")
    src["scores"]["values"]["kfold_r2"] += 1e-3  # not an equivalent of margin.h1: its own row
    (mine / "mnist1d-demogen").mkdir(parents=True)
    (mine / "mnist1d-demogen" / "my_entry.json").write_text(json.dumps(src))
    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(mine), "--mine"], 200, tmp_path)
    assert out.exit_code == 0, out.output
    entries = {line.split()[2] for line in out.output.split("across the")[0].splitlines() if line.split()[:1] and
               (line.split()[0].isdigit() or line.split()[0].startswith("="))}
    assert entries == {"my_entry"}
    assert "margin.h3 also:" not in out.output  # the notes are the rows shown's: no alias note of a shipped entry
    # a row of the mean ranks across zoos: entry, its marks (* local, ! against its claim ...), mean rank, zoos
    across = re.compile(r"^\s*(\S+)(?: [^\w\s(]+)*(?: \(base: mean place\))?\s+[\d.]+\s+\d+\s*$", re.M)
    assert not across.findall(out.output)  # the shipped entries' mean ranks are not the user's
    said = " ".join(out.output.split())
    assert "across the official zoos: none of your records is on one, and no official zoo is built here" in said
    assert all(f"{z}: `genbench zoo get {z}`" in said for z in OFFICIAL_ZOOS)  # not submit again, on the demo zoo
    import genbench.entries.submit.zoos as zoos
    monkeypatch.setattr(zoos, "official_built", lambda: ([OFFICIAL_ZOOS[0]], list(OFFICIAL_ZOOS[1:])))
    said = " ".join(run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(mine), "--mine"],
                        200, tmp_path).output.split())
    assert f"`genbench submit FOLDER` without --zoo scores on the official zoos built here ({OFFICIAL_ZOOS[0]})" in said
    assert f"official zoos not built here: {OFFICIAL_ZOOS[1]}: `genbench zoo get {OFFICIAL_ZOOS[1]}`" in said
    for z in OFFICIAL_ZOOS:  # a record of the user's on both official zoos: its mean rank, and only its
        rec = json.loads((SHIPPED / z / "margin.h1.json").read_text())
        rec.update(name="my_entry", measure="my_entry")
        block = (rec.get("trainings") or {}).get("combined") or rec["scores"]  # where the ranked score is read
        block["values"]["kfold_r2"] += 1e-3
        (mine / z).mkdir(parents=True)
        (mine / z / "my_entry.json").write_text(json.dumps(rec))
    both = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(mine), "--mine"], 200,
               tmp_path)
    assert both.exit_code == 0, both.output
    assert across.findall(both.output) == ["my_entry"], both.output
    none = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--mine"], 200, tmp_path)
    assert "no local records" in none.output
    default = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--results", str(mine)], 200, tmp_path)
    assert "1 of your local records are there: --mine" in default.output  # a record on another zoo is pointed at


def test_html_writes_the_page_without_printing_the_table(monkeypatch, tmp_path):
    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED / ".." / "results"), "--zoo", "mnist1d-demogen",
                            "--html", str(tmp_path / "site")], 200, tmp_path)
    assert out.exit_code == 0, out.output
    assert (tmp_path / "site" / "index.html").is_file() and "ranked by kfold_r2" not in out.output
    both = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--zoo", "mnist1d-demogen", "--format", "table",
                             "--html", str(tmp_path / "site2")], 200, tmp_path)
    assert "ranked by kfold_r2" in both.output  # asked for


def test_help_lists_the_commands_in_the_order_of_the_work_and_flags_as_flags(monkeypatch):
    out = run(monkeypatch, ["--help"], 100)
    listed = [m.group(1) for m in re.finditer(r"^\W*(\w+)\s{2,}\w", out.output.split("Commands")[1], re.M)]
    assert listed == ["zoo", "measures", "evaluate", "score", "audit", "submit", "leaderboard", "verify"]
    for args in (["submit"], ["leaderboard"], ["measures", "check"]):
        text = run(monkeypatch, [*args, "--help"], 100).output
        assert "<bool>" not in text, args  # was `--no-audit <bool>`
    for args in (["leaderboard"], ["measures", "list"], ["measures", "check"]):
        assert "Example" in run(monkeypatch, [*args, "--help"], 100).output, args
    # arguments in the usage line as click writes them, one value's type for a list (typer: {measures}..., <list[str]>)
    evaluate = run(monkeypatch, ["evaluate", "--help"], 100).output
    assert "evaluate [OPTIONS] MEASURES..." in evaluate
    assert re.search(r"--models\s+<str> \(repeatable\)", evaluate) and re.search(r"measures\.\.\.\s+<str>\s", evaluate)
    assert "score [OPTIONS] [MEASURES]..." in run(monkeypatch, ["score", "--help"], 100).output
    for args in (["zoo", "build"], ["verify"], ["leaderboard"], ["leaderboard", "add"], ["submit"], ["measures", "list"]):
        text = run(monkeypatch, [*args, "--help"], 100).output
        assert "<list[" not in text and not re.search(r"Usage: .*\{", text), args


def whole_words(text: str, names: list[str]) -> list[str]:
    """The names that do not appear whole (on one line) in `text`."""
    return [n for n in names if not re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text)]


@pytest.mark.parametrize("width", [80, 68])
def test_no_name_is_cut(monkeypatch, tmp_path, width):
    from genbench.measures import list_measures

    measures = run(monkeypatch, ["measures", "list"], width, tmp_path)
    assert max(len(line) for line in measures.output.splitlines()) <= width
    assert whole_words(measures.output, list_measures("*")) == []
    assert "init_weights" in measures.output and "\u2026" not in measures.output
    board = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED)], width, tmp_path)
    assert max(len(line) for line in board.output.splitlines()) <= width and "\u2026" not in board.output
    shown = {r["measure"] for z in OFFICIAL_ZOOS for r in
             (json.loads(p.read_text()) for p in (SHIPPED / z).glob("*.json"))}
    assert whole_words(board.output, sorted(OFFICIAL_ZOOS)) == []
    assert len(whole_words(board.output, sorted(shown))) <= 2  # entries folded as aliases are named in a note
    for args in COMMANDS:
        text = run(monkeypatch, [*args, "--help"], width).output
        assert "\u2026" not in text, args
        options = set(re.findall(r"--[a-z][a-z-]+", text))
        assert whole_words(text, sorted(options)) == [], args


def test_an_unwritable_home_is_refused_before_any_work(monkeypatch, tmp_path):
    from genbench.errors import GenbenchError
    from genbench.paths import check_writable

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (["leaderboard", "run", "norm.fro_prod"], ["submit", "submissions/_template"],
                 ["zoo", "build", "digits-mlp"], ["evaluate", "norm.fro_prod", "--zoo", "digits-mlp"],
                 ["score", "--zoo", "digits-mlp"], ["audit", "norm.fro_prod"]):
        out = run(monkeypatch, args, 200, blocker / "home")
        assert isinstance(out.exception, GenbenchError), (args, out.output)
        assert "is a file, not a folder" in str(out.exception) and "\n" not in str(out.exception)
    assert not (blocker.parent / "home").exists()
    check_writable(tmp_path / "new" / "folder")  # a folder still to be made, under a writable one: fine
    assert not (tmp_path / "new").exists()  # and nothing is created by the check


def test_readme_first_screen_says_how_to_start_and_performance_lives_in_its_own_page():
    root = SHIPPED.parent.parent
    readme = (root / "README.md").read_text()
    first = "\n".join(readme.splitlines()[:60])
    for needed in ("make demo", "make test", "genbench zoo build demogen-nin-mnist1d", "fantastic-cnn-mnist1d",
                   "baseline.hparams", "genbench submit submissions/", "genbench leaderboard"):
        assert needed in first, needed
    for machine in ("malloc", "OMP_", "MKL_CBWR", "ATEN_CPU_CAPABILITY"):
        assert machine not in readme, machine  # moved to docs/performance.md
    perf = (root / "docs" / "performance.md").read_text()
    assert "GENBENCH_SYSTEM_MALLOC" in perf and "OMP_WAIT_POLICY" in perf and "MKL_CBWR=AVX2,STRICT" in perf
    anchors = {re.sub(r"[^\w\- ]", "", h.strip("# ").lower()).replace(" ", "-") for h in perf.splitlines()
               if h.startswith("#")}
    links = re.findall(r"\]\(docs/performance\.md#([\w-]+)\)", readme)
    assert links and set(links) <= anchors


def test_a_failure_records_reason_is_shown_whole(monkeypatch, tmp_path):
    """pacbayes.marginal_likelihood's failure on the NiN zoo says why and what to do in about 300 characters; the views
    cut it at 200, before the reason ('... (135 more characters)')."""
    reason = json.loads((SHIPPED / "demogen-nin-mnist1d" / "pacbayes.marginal_likelihood.json").read_text())["failure"]
    assert 200 < len(reason) <= 600 and reason.endswith("Leave this measure out for zoos of other families.")
    for args in (["leaderboard", "--results", str(SHIPPED)],
                 ["leaderboard", "--results", str(SHIPPED), "--zoo", "demogen-nin-mnist1d"]):
        out = run(monkeypatch, args, 100, tmp_path)
        assert out.exit_code == 0, out.output
        assert reason in " ".join(out.output.split()) and "more characters" not in out.output, args


def test_sorting_by_mse_shows_numbers_that_tell_entries_apart(monkeypatch, tmp_path):
    """An MSE of gap predictions is about 1e-3: two decimals printed '0.00 [0.00, 0.00]' for every entry."""
    from genbench.record import Record

    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--zoo", "demogen-nin-mnist1d", "--sort", "mse"],
              200, tmp_path)
    assert out.exit_code == 0, out.output
    rec = Record.read(SHIPPED / "demogen-nin-mnist1d" / "pgdl.augment_robustness.json")
    row = next(line for line in out.output.splitlines() if re.match(r"1\s+\S+\s+pgdl\.augment_robustness ", line))
    lo, hi = rec.interval("mse")
    assert f"{rec.score('mse'):.5f} [{lo:.5f}, {hi:.5f}]" in row and "0.00 [0.00, 0.00]" not in out.output


def test_a_scalar_that_declares_no_direction_is_marked_no_claim(monkeypatch, tmp_path):
    """Its ranking k-fold R^2 fits the slope freely where the others' hold it to their claim: every view marks it
    (terminal `?` with its legend, markdown and csv `no claim`, the page's badge), on a zoo and on the official
    view. Planted: a shipped scalar's record with its claim taken away."""
    from genbench.leaderboard.site import write_site
    from genbench.record import load_records
    mine = tmp_path / "mine"
    for zoo in ("mnist1d-demogen", OFFICIAL_ZOOS[0]):
        rec = json.loads((SHIPPED / zoo / "norm.path.json").read_text())
        assert rec["scores"]["direction"]["claim"] == "larger_gap"  # the plant needs a checked scalar
        rec.update(name="my_free", measure="my_free")
        rec["scores"]["direction"] = {"claim": None, "against": False}
        for block in (rec["scores"], (rec.get("trainings") or {}).get("combined") or {}):
            if block:
                block["values"]["kfold_r2"] += 1e-3  # its own row, not an alias of norm.path
        (mine / zoo).mkdir(parents=True)
        (mine / zoo / "my_free.json").write_text(json.dumps(rec))
    args = ["leaderboard", "--results", str(SHIPPED), "--results", str(mine)]
    out = run(monkeypatch, [*args, "--zoo", "mnist1d-demogen"], 200, tmp_path)
    assert out.exit_code == 0, out.output
    assert re.search(r"^\s*\S+\s+\S*\s*my_free \* \?", out.output, re.M), out.output
    said = " ".join(out.output.split())
    assert "? after an entry's name: no claim (a scalar that declares no direction: its slope fitted freely" in said
    assert "norm.path ?" not in said and "norm.path * ?" not in said  # the declared twin is not marked
    official = " ".join(run(monkeypatch, args, 200, tmp_path).output.split())
    assert "my_free * ?" in official and "?: no claim (a scalar that declares no direction" in official
    md = run(monkeypatch, [*args, "--zoo", "mnist1d-demogen", "--format", "markdown"], 200, tmp_path).output
    assert "my_free (no claim)" in md and "no claim: the entry's measure is a scalar that declares no direction" in md
    csv = pd.read_csv(io.StringIO(run(monkeypatch, [*args, "--zoo", "mnist1d-demogen", "--format", "csv"], 200,
                                      tmp_path).stdout)).set_index("entry")
    assert csv.loc["my_free", "claim"] == "no claim" and csv.loc["norm.path", "claim"] != "no claim"
    shipped = [r for z in ("mnist1d-demogen", OFFICIAL_ZOOS[0]) for r in load_records(SHIPPED, z)]
    index = write_site(shipped + load_records(mine), tmp_path / "site")
    assert index.read_text().count('class="badge badge-noclaim"') == 2  # my_free's rows on both zoos, only them
    entries = index.parent / "entries" / "mnist1d-demogen"
    assert "badge-noclaim" in (entries / "my_free.html").read_text()
    assert "badge-noclaim" not in (entries / "norm.path.html").read_text()


@pytest.mark.parametrize("columns, kept", [("0", False), ("-3", False), ("abc", False), ("", False), ("120", True)])
def test_a_width_that_is_none_is_forgotten(monkeypatch, columns, kept):
    """Planted: COLUMNS=0 made every command print nothing at all, errors included (rich wrapped each line to
    width 0); such a COLUMNS is forgotten and the console measures the terminal."""
    from rich.console import Console

    from genbench.cli.app import drop_bad_width
    monkeypatch.setenv("COLUMNS", columns)
    drop_bad_width()
    import os
    assert ("COLUMNS" in os.environ) == kept
    assert Console().width == 120 if kept else Console().width > 0


def test_small_cli_messages_say_what_was_asked(monkeypatch, tmp_path):
    """Planted, each: `leaderboard --sort tau` said 'rank: by k-fold R^2'; `leaderboard --zoo ''` said the shipped
    folder held no records; `audit 'norm.*'` offered close names as for a typo."""
    out = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--sort", "tau"], 200, tmp_path)
    assert out.exit_code == 0 and "rank: by tau on each zoo" in out.output and "rank: by k-fold" not in out.output
    assert "rank: by k-fold R^2 on each zoo" in run(monkeypatch, ["leaderboard", "--results", str(SHIPPED)], 200,
                                                    tmp_path).output
    empty = run(monkeypatch, ["leaderboard", "--results", str(SHIPPED), "--zoo", ""], 200, tmp_path)
    assert str(empty.exception).startswith(f"no records for zoo '' in {SHIPPED}; zoos with records: [")
    glob = run(monkeypatch, ["audit", "norm.*"], 200, tmp_path)
    assert str(glob.exception).startswith("audit takes one measure, not the pattern 'norm.*'")


@pytest.mark.parametrize("verdict, note, code", [
    ("robust", "", "ok"),
    ("fragile-value, fragile-scale, data-blind; inconclusive: trend", "", "fv fs db ?"),  # the ? was dropped
    # the reasons of an inconclusive verdict hold ',' and ';': they came out as labels, "trend" lost
    ("inconclusive (no trend, scaling: 0 judged twin curves < 3 per twin kind; no data: 2 groups)", "", "?"),
    ("inconclusive (no value: x; no trend, scaling: y)", "unranked: partial zoo (3 of 8 models)", "?"),
    ("data-blind", "unranked: partial zoo (3 of 8 models)", "db"),
    ("not audited", "", "-"),
])
def test_a_fragility_cell_codes_the_verdict_and_keeps_the_note_whole(verdict, note, code):
    from genbench.leaderboard.terminal import fragility_cell, fragility_code

    text = verdict + (f"; {note}" if note else "")  # as export.py writes a row's fragility
    assert fragility_code(text, note) == code
    assert fragility_cell(text, note) == code + (f"; {note}" if note else "")
