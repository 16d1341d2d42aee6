"""genbench submit, as a reviewer broke it: what the ranking after the records cannot do is one yellow line (with
each flag of its fix given once), a measure's odd return values are the same per-model errors in the sandbox as in
process, a later zoo's crash keeps the records of the zoos that finished, and a folder named like a shipped
submission is refused."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from genbench.errors import GenbenchError


def test_a_ranking_that_cannot_pair_is_one_yellow_line_whose_fix_gives_n_boot_once(monkeypatch, tmp_path):
    import genbench.cli as cli
    from genbench.cli import submit as submit_cli
    from genbench.leaderboard import standings
    from genbench.record import Record

    mine = Record({"name": "my_measure", "zoo": {"name": "z"}, "submission": {"path": "x"},
                   "provenance": {"command": "genbench submit x --zoo z --no-audit --n-boot 200 --budget-s 3"}})
    message = (f"cannot pair the records of 'z': they were made with different bootstrap settings; regenerate the odd "
               f"ones with the same settings ({standings._commands([mine], ' --n-boot 1000')}, seed 0)")
    assert message.count("--n-boot") == 2  # what the leaderboard says of a submission's record

    def refuse(records):
        raise GenbenchError(message)

    monkeypatch.setattr(standings, "rank_records", refuse)
    out = io.StringIO()
    monkeypatch.setattr(cli.console, "file", out)
    assert submit_cli._ranked_beside_the_shipped(tmp_path) == []
    line = " ".join(out.getvalue().split())
    assert line.startswith("cannot rank the new records beside the others: cannot pair the records of 'z'"), line
    assert "(`genbench submit x --zoo z --no-audit --budget-s 3 --n-boot 1000`, seed 0)" in line, line
