"""Issue 42 (items 2, 5-8, 10, 11), issue 40 (items 7, 8): nothing a submission or a record brings is trusted on the
parent's side. Each test plants what an attacker's submission or forged record brought: links to a home file, files
that never end, YAML that expands, fields of megabytes, control sequences and markup, a record that sets its own
budgets, bootstrap count and Hub repository, a copy of a built-in, a zoo the submission chose, and a second folder
taking an entry."""
from __future__ import annotations

import json
import os
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.entries.submit import load_submission, submit
from genbench.entries.submit.sandbox import sandbox_problem
from genbench.record import Record, load_records, write_record

SANDBOXED = sandbox_problem() is None
FAST = dict(audit_zoo=None, n_boot=20, budget_s=30, device="cpu", unsandboxed=not SANDBOXED)
CLI_SANDBOX = [] if SANDBOXED else ["--unsandboxed"]
SECRET = "machine api.example.org login ada password hunter2-SECRET"
YAML = {"title": "t", "authors": ["A. Author"], "contact": "a@example.org", "paper_url": None, "licence": "MIT",
        "entry": "sub.entry", "zoos": ["digits-mlp"]}
# every class of character that acts on a terminal, and rich markup, in one string
PLANTED = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil\u2066\u200b\U000e0041[bold red]MARKUP[/bold red]\r"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u200b", "\U000e0041", "\r")


def write_yaml(folder: Path, **fields) -> None:
    meta = {**YAML, **fields}
    (folder / "submission.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in meta.items()) + "\n")


def make_submission(root: Path, name: str, body: str = "", **fields) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "measure.py").write_text("import genbench as gb\n" + textwrap.dedent(body))
    write_yaml(folder, **fields)
    return folder


def secret_file(tmp_path: Path) -> Path:
    """A file of the user's home (~/.netrc) that no submission may read."""
    home = tmp_path / "userhome"
    home.mkdir(exist_ok=True)
    (home / ".netrc").write_text(f"title: {SECRET}\n")
    return home / ".netrc"


def assert_escaped(text: str) -> None:
    """No planted character reaches the output raw, and the markup is shown as text, not acted on."""
    for ch in RAW:
        assert ch not in text, repr(ch)
    joined = "".join(text.split())  # as wrapped at the terminal's width
    assert "\\x1b" in joined and "\\u202e" in joined


def flat(result) -> str:
    return " ".join(result.output.split())


# ---------------------------------------------------------------- item 2, 5/6: links, caps, bounded parsing


def test_a_submission_yaml_that_links_to_a_home_file_is_refused_without_quoting_it(tmp_path):
    folder = make_submission(tmp_path, "linked")
    (folder / "submission.yaml").unlink()
    (folder / "submission.yaml").symlink_to(secret_file(tmp_path))
    with pytest.raises(GenbenchError, match="submission.yaml is a symbolic link") as info:
        load_submission(folder)
    assert "hunter2" not in str(info.value)


def test_a_measure_py_that_links_to_a_home_file_is_refused_before_it_is_hashed(tmp_path):
    folder = make_submission(tmp_path, "linked_measure")
    (folder / "measure.py").unlink()
    (folder / "measure.py").symlink_to(secret_file(tmp_path))
    with pytest.raises(GenbenchError, match="measure.py is a symbolic link"):
        load_submission(folder)


def test_a_linked_submission_folder_is_refused_by_submit(tmp_path, digits_zoo):
    """Issue 42 item 11: submissions/X that is a link (to the checkout, here to another folder) is never bound into
    the sandbox: submit refuses it before anything runs."""
    real = make_submission(tmp_path / "elsewhere", "real")
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "sneaky").symlink_to(real)
    with pytest.raises(GenbenchError, match="is a symbolic link"):
        submit(tmp_path / "submissions" / "sneaky", ["digits-mlp"], results_root=tmp_path / "r", **FAST)
    out = CliRunner().invoke(app, ["submit", str(tmp_path / "submissions" / "sneaky"), "--results",
                                   str(tmp_path / "r"), *CLI_SANDBOX])
    assert isinstance(out.exception, GenbenchError) and "symbolic link" in str(out.exception)
    assert not (tmp_path / "r").exists()


def test_a_pipe_or_an_oversized_file_is_refused_without_being_read(tmp_path):
    folder = make_submission(tmp_path, "pipe")
    (folder / "submission.yaml").unlink()
    os.mkfifo(folder / "submission.yaml")  # reading it would block forever
    done: list[BaseException] = []
    t = threading.Thread(target=lambda: done.append(pytest.raises(GenbenchError, load_submission, folder).value))
    t.start()
    t.join(20)
    assert done and "not a regular file" in str(done[0])
    (folder / "submission.yaml").unlink()
    (folder / "submission.yaml").write_text("title: " + "x" * (100 * 1024) + "\n")
    with pytest.raises(GenbenchError, match="larger than 16,384 bytes"):
        load_submission(folder)
    write_yaml(folder)
    with open(folder / "measure.py", "r+b") as f:  # a sparse measure.py of 4 GB: never read whole
        f.truncate(4 * 2**30)
    sub = load_submission(folder)
    with pytest.raises(GenbenchError, match="measure.py is larger than 1,048,576 bytes"):
        sub.source_sha256


def test_a_field_given_twice_in_submission_yaml_is_refused_not_silently_replaced(tmp_path):
    folder = make_submission(tmp_path, "twice")
    text = (folder / "submission.yaml").read_text()
    (folder / "submission.yaml").write_text(text + "\ntitle: a second title\n")
    with pytest.raises(GenbenchError, match=r"submission.yaml: not valid YAML at line \d+, column 1: the key 'title' "
                                            "is given twice"):
        load_submission(folder)


def test_yaml_aliases_are_refused_so_a_few_bytes_cannot_expand(tmp_path):
    folder = make_submission(tmp_path, "bomb")
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'] + [
        f'{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},'
        f'*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]' for i in range(8)]
    (folder / "submission.yaml").write_text("\n".join(lines) + "\ntitle: *i\n")  # 9^9 strings once expanded
    with pytest.raises(GenbenchError, match="not valid YAML at line 1.*anchors and aliases"):
        load_submission(folder)
    (folder / "submission.yaml").write_text("title: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(GenbenchError, match="not valid YAML"):
        load_submission(folder)


@pytest.mark.parametrize("field, value, expected", [
    ("title", "x" * 3_000_000, "larger than 16,384 bytes"),  # a multi-megabyte title: the file's cap
    ("title", "x" * 3000, "at most 300 characters"),
    ("title", "a title\x1b]0;pwned\x07", "without control or bidirectional characters"),
    ("title", "an \u202eevil title", "without control or bidirectional characters"),
    ("authors", ["A" * 5000], "at most 200 characters"),
    ("authors", ["A"] * 500, "at most 100"),
    ("contact", "a@" + "b" * 300 + ".org", "at most 254 characters"),
    ("paper_url", "https://x.org/" + "p" * 3000, "at most 2000 characters"),
    ("entry", "a." + "b" * 200, "at most 100 characters"),
])
def test_every_field_has_a_length_limit_and_no_control_characters_and_errors_quote_a_short_excerpt(
        tmp_path, field, value, expected):
    folder = make_submission(tmp_path, "long")
    (folder / "submission.yaml").write_text(
        "\n".join(f"{k}: {json.dumps(v)}" for k, v in {**YAML, field: value}.items()) + "\n")
    with pytest.raises(GenbenchError, match=expected) as info:
        load_submission(folder)
    message = str(info.value)
    assert len(message) < 600 and "\x1b" not in message and "\u202e" not in message


# ---------------------------------------------------------------- item 11: scored only on known zoos


@pytest.mark.parametrize("zoo", ["/tmp/myzoo", "submissions/evil/zoo", "hf://evil/repo", "my-own-zoo", "../digits-mlp"])
def test_submission_yaml_names_only_genbench_zoos_never_a_path_or_a_hub_repository(tmp_path, zoo):
    folder = make_submission(tmp_path, "chooser", zoos=[zoo])
    with pytest.raises(GenbenchError, match="field 'zoos': expected names of genbench's zoos, never a path or a Hub"):
        load_submission(folder)


def test_a_zoo_in_the_current_folder_never_stands_in_for_a_known_zoo(tmp_path, monkeypatch):
    """A submission that ships a folder digits-mlp/ with a zoo of its own and is submitted from its folder: the zoo
    named in submission.yaml is opened only among the zoos built here (here: none)."""
    from genbench.entries.submit.api import known_zoo
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "empty-home"))
    folder = make_submission(tmp_path, "shipper", "", zoos=["digits-mlp"])
    (folder / "digits-mlp").mkdir()
    (folder / "digits-mlp" / "zoo.json").write_text("{}")
    monkeypatch.chdir(folder)
    with pytest.raises(GenbenchError, match="zoo 'digits-mlp' \\(from submission.yaml\\) is not built here"):
        known_zoo("digits-mlp")
    with pytest.raises(GenbenchError, match="is not built here"):
        submit(folder, None, results_root=tmp_path / "r", **FAST)


# ---------------------------------------------------------------- issue 40 item 8: one entry, one folder


def test_an_entry_another_folders_record_holds_is_refused_at_submit_naming_both_folders(tmp_path, digits_zoo):
    from site_records import gaps, heldout_of, scored_record
    gap = gaps(24)
    first = scored_record("first_folder", "digits-mlp", gap, heldout_of(gap, gap * 0.1, 0), n_boot=20,
                          submission={"title": "t", "entry": "shared.entry", "path": "submissions/first_folder"})
    first["measure"], first["builtin"] = "shared.entry", False
    results = tmp_path / "results"
    write_record(first, results)
    second = make_submission(tmp_path / "subs", "second_folder", entry="shared.entry")
    with pytest.raises(GenbenchError, match="'shared.entry' is already the entry of submission 'first_folder'") as e:
        submit(second, ["digits-mlp"], results_root=results, **FAST)
    assert str(second) in str(e.value) and "submissions/first_folder" in str(e.value)
    assert "failure record" not in str(e.value)
    failed = {**first, "status": "failed", "failure": "measure.py raised at import", "scores": None}
    write_record(failed, results)  # a failed first submit holds the entry too: said, with how to clear it
    with pytest.raises(GenbenchError, match="is already the entry of submission 'first_folder'") as e:
        submit(second, ["digits-mlp"], results_root=results, **FAST)
    assert f"a failure record: `genbench leaderboard failed --remove --results {results}` deletes it" in str(e.value)
    again = make_submission(tmp_path / "subs2", "first_folder", entry="shared.entry")  # its own folder: not in the way
    from genbench.entries.submit.api import check_entry_is_free
    check_entry_is_free(load_submission(again), results)


# ---------------------------------------------------------------- item 7 + issue 40 item 7: what submit prints


def test_submit_prints_a_planted_title_error_and_output_escaped_and_names_a_dropped_model(tmp_path, digits_zoo):
    """The measure prints control sequences, returns NaN on one model (the last, beyond the conformance suite's two)
    and its title carries markup: the output shows all of it escaped, and names the model that was dropped."""
    last = digits_zoo.model_ids[-1]
    target = float(sum(p.detach().abs().sum() for p in digits_zoo.load_model(last).parameters()))
    body = f"""
        import math

        @gb.register_measure("planted.nan_once", citation={PLANTED!r})
        def nan_once(ctx):
            print({PLANTED!r}, flush=True)
            s = float(sum(p.detach().abs().sum() for p in ctx.model.parameters()))
            return float("nan") if math.isclose(s, {target!r}, rel_tol=1e-6) else s
        """
    folder = make_submission(tmp_path, "planted", body, entry="planted.nan_once",
                             title="[bold red]MARKUP TITLE[/bold red]")
    out = CliRunner().invoke(app, ["submit", str(folder), "--zoo", "digits-mlp", "--results", str(tmp_path / "r"),
                                   "--no-audit", "--n-boot", "20", "--budget-s", "30", "--device", "cpu",
                                   *CLI_SANDBOX])
    assert out.exit_code == 0, out.output
    assert_escaped(out.output)
    text = flat(out)
    assert "[bold red]MARKUP TITLE[/bold red]" in text
    assert f"1 of 24 models dropped: non-finite value (nan) at component(s) [0] on {last}" in text


def test_submit_prints_a_planted_exception_message_escaped(tmp_path, digits_zoo):
    folder = make_submission(tmp_path, "raiser", f"raise RuntimeError({PLANTED!r})\n")
    out = CliRunner().invoke(app, ["submit", str(folder), "--zoo", "digits-mlp", "--results", str(tmp_path / "r"),
                                   "--no-audit", "--device", "cpu", *CLI_SANDBOX])
    assert out.exit_code == 1 and "FAILED" in out.output
    for ch in RAW:
        assert ch not in out.output, repr(ch)
    assert "[bold red]MARKUP[/bold red]" in flat(out)


# ---------------------------------------------------------------- item 7: what leaderboard failed / add / verify print


def forged(name: str, zoo: str = "digits-mlp", **changes) -> dict:
    from site_records import gaps, heldout_of, scored_record
    gap = gaps(24)
    rec = scored_record(name, zoo, gap, heldout_of(gap, gap * 0.1, 0), n_boot=20)
    rec.update(changes)
    return rec


def test_leaderboard_failed_add_and_verify_print_a_forged_records_fields_and_file_name_escaped(tmp_path):
    results = tmp_path / "results"
    rec = forged("forged_entry", status="failed", failure=PLANTED * 3, citation=PLANTED, builtin=False,
                 submission={"title": PLANTED, "entry": "forged.entry", "path": PLANTED})
    path = write_record(rec, results)
    out = CliRunner().invoke(app, ["leaderboard", "failed", "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert_escaped(out.output)
    assert "MARKUP" in out.output and "[bold red]" in out.output

    odd = tmp_path / f"odd[bold]{PLANTED[:4]}\u202e" / "rec.json"  # the file's own name is untrusted too
    odd.parent.mkdir()
    odd.write_bytes(path.read_bytes())
    to = tmp_path / "shipped"
    to.mkdir()
    out = CliRunner().invoke(app, ["leaderboard", "add", str(odd), "--to", str(to)])
    assert out.exit_code == 1 and "a failed record is not added" in flat(out)
    assert_escaped(out.output)
    assert "odd[bold]" in out.output and not any(to.iterdir())

    bad = forged("norm.params", measure="norm.params")
    bad["zoo"]["name"] = PLANTED
    odd.write_text(json.dumps(bad))
    out = CliRunner().invoke(app, ["verify", str(odd)])
    assert out.exit_code == 1 and "cannot verify" in out.output and "is not a plain name" in flat(out)
    assert_escaped(out.output)


def test_verify_prints_planted_differences_escaped():
    from genbench.cli import console
    from genbench.cli.entries import _print_why
    from genbench.entries.verify import Verification
    v = Verification("r.json", differences=[(f"scores.{PLANTED}", PLANTED, "[red]x[/red]")],
                     problems=[f"a problem quoting {PLANTED}"])
    with console.capture() as cap:
        _print_why(v)
    shown = cap.get()
    assert_escaped(shown)
    assert "[red]x[/red]" in shown and "[bold red]MARKUP" in shown


def test_records_are_read_only_as_regular_files_within_a_cap(tmp_path):
    results = tmp_path / "results"
    good = write_record(forged("good"), results)
    home_json = tmp_path / "home.json"
    home_json.write_text(json.dumps(forged("linked")))
    (results / "digits-mlp" / "linked.json").symlink_to(home_json)
    os.mkfifo(results / "digits-mlp" / "fifo.json")
    with open(results / "digits-mlp" / "huge.json", "wb") as f:
        f.truncate(2**30)  # sparse: a gigabyte that is never read
    (results / "digits-mlp" / "folder.json").mkdir()
    skipped: list[str] = []
    recs = load_records(results, skipped=skipped)
    assert [r.name for r in recs] == ["good"] and good.is_file()
    said = " ".join(skipped)
    assert "linked.json is a symbolic link" in said and "fifo.json is not a regular file" in said
    assert "huge.json is larger than" in said and "folder.json is a folder; genbench reads only regular files" in said


# ---------------------------------------------------------------- item 8: a record names what to re-run, no more


def test_verify_takes_budgets_resamples_seed_and_zoo_sources_from_genbench_not_the_record(tmp_path, monkeypatch):
    from genbench.defaults import BUDGET_S, N_BOOT
    from genbench.entries import verify as verify_mod
    from genbench.entries.verify import Limits, cited_zoo, trusted_settings
    rec = Record(forged("forged", provenance={"n_boot": 100_000, "budget_s": 1e9, "seed": 7, "audit_zoo": None}))
    notes: list[str] = []
    settings = trusted_settings(rec, notes=notes)
    assert settings["n_boot"] == N_BOOT and settings["budget_s"] == BUDGET_S and settings["seed"] == 0
    said = " ".join(notes)
    assert "asks for 100000 bootstrap resamples; verify makes at most 1000 (--max-n-boot" in said
    assert "budget 1000000000.0 s" in said and "--max-budget-s" in said and "seed 7" in said
    raised = trusted_settings(rec, Limits(n_boot=200_000, budget_s=2e9))
    assert raised["n_boot"] == 100_000 and raised["budget_s"] == 1e9  # the flags raise the bounds
    small = trusted_settings(Record(forged("small", provenance={"n_boot": 20, "budget_s": 30})), notes=(n := []))
    assert (small["n_boot"], small["budget_s"], n) == (20, 30.0, [])  # a record within the bounds: as written
    with pytest.raises(GenbenchError, match="audit zoo 'hf://evil/zoo' is not one of genbench's zoos"):
        trusted_settings(Record(forged("a", provenance={"audit_zoo": "hf://evil/zoo"})))

    opened: list[str] = []
    monkeypatch.setattr(verify_mod, "load_zoo", lambda s, revision=None: opened.append(str(s)) or
                        (_ for _ in ()).throw(GenbenchError("unreachable")))
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "empty"))
    hub = forged("hub")
    hub["zoo"].update(repo="evil/repo", revision="main")
    notes = []
    zoo, why = cited_zoo(Record(hub), notes=notes)
    assert zoo is None and not any("evil" in o for o in opened)  # never fetched
    assert opened == ["hf://genbench/digits-mlp"]  # only the canonical copy of a genbench zoo
    assert "names the Hub repository 'evil/repo'" in " ".join(notes)


def test_verify_cli_says_when_it_clamped_a_records_values(tmp_path):
    rec = forged("clamped", provenance={"n_boot": 100_000, "budget_s": 1e9, "seed": 0})
    rec["zoo"]["name"] = "no-such-zoo"
    path = write_record(rec, tmp_path / "r")
    out = CliRunner().invoke(app, ["verify", str(path)])
    text = flat(out)
    assert out.exit_code == 1 and "note: the record asks for 100000 bootstrap resamples" in text
    assert "--max-n-boot" in text


def test_verify_refuses_a_linked_submission_folder_and_a_linked_submission_yaml(tmp_path):
    from genbench.entries.submit.api import rerun_record
    subs = tmp_path / "submissions"
    real = make_submission(tmp_path / "elsewhere", "target")
    subs.mkdir()
    (subs / "linked").symlink_to(real)
    rec = Record(forged("linked", builtin=False, submission={"path": "submissions/linked"}))
    with pytest.raises(GenbenchError, match="symbolic link") as info:
        rerun_record(rec, None, subs)
    inner = make_submission(subs, "inner")
    (inner / "submission.yaml").unlink()
    (inner / "submission.yaml").symlink_to(secret_file(tmp_path))
    with pytest.raises(GenbenchError, match="submission.yaml is a symbolic link") as info:
        rerun_record(Record(forged("inner", builtin=False, submission={})), None, subs)
    assert "hunter2" not in str(info.value)


# ---------------------------------------------------------------- item 10: a copy never takes a built-in's place


def test_a_submission_equal_to_a_built_in_is_shown_as_its_alias_whatever_its_name():
    from genbench.leaderboard.standings import rank_records
    builtin = forged("norm.fro_sum", measure="norm.fro_sum")
    copy = json.loads(json.dumps(builtin))
    copy.update(name="aaa_copy", measure="aaa.copy", builtin=False,
                submission={"title": "a copy", "entry": "aaa.copy", "path": "submissions/aaa_copy"})
    for order in ([copy, builtin], [builtin, copy]):
        ranked = [r for r in rank_records(order) if r.rank is not None]
        assert [(r.name, r.aliases) for r in ranked] == [("norm.fro_sum", ["aaa_copy"])]
    local = json.loads(json.dumps(copy))
    local["name"] = "aaa_local"
    shipped = {**copy, "name": "zzz_shipped"}
    ranked = [r for r in rank_records([Record(local).with_local(True), Record(shipped).with_local(False)])
              if r.rank is not None]
    assert [(r.name, r.aliases) for r in ranked] == [("zzz_shipped", ["aaa_local"])]  # verified before local


def test_the_error_line_shows_markup_and_control_characters_of_a_message_escaped(tmp_path, monkeypatch, capsys):
    """`genbench`'s one error line prints the message through rich: markup in a path or a quoted field is shown, not
    acted on, and control characters come out escaped."""
    import sys

    from genbench.cli import main
    missing = tmp_path / f"no[bold]such\x1b[2J\u202e"
    monkeypatch.setattr(sys, "argv", ["genbench", "submit", str(missing)])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and "does not exist" in err
    assert "no[bold]such" in "".join(err.split()) and "\x1b[2J" not in err and "\u202e" not in err
