"""Records re-audited after the audit changed: each built-in measure's fragility audit run again on the audit zoo
its record names, the record's audit block replaced. An audit depends on the measure and the audit zoo only, so
neither the scored zoo nor the scores are needed (or touched); the provenance says when and by which genbench the
audit was re-made. A submission's audit runs in its sandbox: `genbench submit` re-makes it."""
from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..defaults import AUTO_AUDIT
from ..errors import GenbenchError
from ..fileio import json_safe, write_json_atomic
from ..record import Record, git_commit
from ..version import __version__

COMMAND = "genbench leaderboard reaudit"


def reaudit_record(rec: dict[str, Any], *, command: str = COMMAND, progress: bool = False) -> dict[str, Any] | None:
    """The record with its audit block re-made by this genbench (None: it has no audit to re-make); a submission's
    record is refused, naming the command that re-makes it."""
    from ..scoring import audit
    from ..zoo.storage import load_zoo
    r = Record(rec)
    zoo = r.audit_zoo
    if not r.ok or not zoo:
        return None
    if r.submission:
        raise GenbenchError(f"{r.name} on {r.zoo_name} is a submission's record: its audit runs in the sandbox; "
                            f"`genbench submit {r.submission_path or 'its folder'}` re-makes it")
    prov = r.provenance
    asked = prov.get("audit_zoo")  # the zoo as the run named it (a folder, or a name), else the audit's own name
    where = load_zoo(str(asked) if isinstance(asked, str) and asked not in ("", AUTO_AUDIT) else str(zoo))
    if where.name != zoo:
        raise GenbenchError(f"the record of {r.name} on {r.zoo_name} was audited on {zoo!r}, but {asked!r} is now the "
                            f"zoo {where.name!r}")
    cited = r.audit.get("zoo_table_sha256")
    if cited and cited != where.table_sha256:  # another build: the new block would cite it and hide the swap
        raise GenbenchError(f"the record of {r.name} on {r.zoo_name} was audited on a build of {zoo} with table "
                            f"{str(cited)[:12]}, the one here has {where.table_sha256[:12]}: get that build "
                            f"(`genbench zoo get {zoo}`, or rebuild it from its recipe) to re-audit the record")
    report = audit(r.measure, where, seed=int(prov.get("seed", 0)), progress=progress)
    stamp = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "genbench_version": __version__, "git_commit": git_commit(), "command": command}
    return {**rec, "audit": report.to_dict(), "provenance": {**prov, "reaudited": stamp}}


def reaudit_folder(root: Path, *, zoo: str | None = None, measures: list[str] | None = None,
                   say: Callable[[str], None] = lambda text: None) -> tuple[list[Path], list[str]]:
    """Re-audit, in place, the records under `root` (one zoo's when `zoo`, the named `measures`' when given): the
    paths written, and why each record that could not be re-audited was not (it is left as it was, and the others
    go on). Records without an audit, failure records and submissions' records are skipped, each said."""
    written: list[Path] = []
    refused: list[str] = []
    for path in sorted(root.glob(f"{zoo or '*'}/*.json")):
        try:
            r = Record.read(path)
            if measures and r.measure not in measures:
                continue
            if r.submission:
                say(f"{path}: a submission's record, skipped (`genbench submit` re-makes its audit)")
                continue
            new = reaudit_record(r.data)
        except GenbenchError as e:
            refused.append(f"{path}: {e}")
            say(f"{path}: not re-audited: {e}")
            continue
        if new is None:
            say(f"{path}: no audit to re-make (not audited, or a failure record)")
            continue
        write_json_atomic(path, json_safe(new))  # in place, where the record was found
        say(f"{path}: {r.verdict} -> {Record(new).verdict}")
        written.append(path)
    return written, refused
