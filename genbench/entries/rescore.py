"""Records re-scored after the scoring changed: each record's scores recomputed from its own per-model values on
the zoo it cites (found by its table hash), the measure not run again; the baseline rows re-made from the zoo's
table and, for baseline.all_measures, from the values in the records of its inputs. The audit, the values and
the provenance are kept; the provenance says when and by which genbench the scores were recomputed."""
from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import GenbenchError, did_you_mean
from ..record import SCHEMA, Record, git_commit, loads_json, values_block, write_record
from ..version import __version__
from ..zoo.storage import Zoo
from .run import NO_AUDIT, baselines_source_hash
from .trainings import trainings_block
from .verify import cited_zoo


def _raw(path: Path) -> dict[str, Any]:
    """A record file as JSON, whatever its schema (read_record refuses the old ones this module upgrades)."""
    try:
        rec = loads_json(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # not UTF-8, not JSON, an integer of thousands of digits
        raise GenbenchError(f"cannot read result record {path}: {e}") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("zoo"), dict) or "status" not in rec:
        raise GenbenchError(f"{path} is not a genbench result record")
    if not isinstance(rec.get("schema"), int) or not 2 <= rec["schema"] <= SCHEMA:
        raise GenbenchError(f"{path} has record schema {rec.get('schema')!r}: only schema 2 and {SCHEMA} records "
                            "hold what re-scoring needs; regenerate it with `genbench leaderboard run`")
    return rec


def value_table(rec: Mapping[str, Any]) -> pd.DataFrame:
    """A record's per-model values as gb.evaluate's table: model_id and the measure's column(s), model-id order."""
    vals, name, kind = rec.get("values") or {}, rec["measure"], rec.get("kind")
    ids, value = vals.get("model_id"), vals.get("value")
    if not ids or value is None or len(value) != len(ids):
        raise GenbenchError(f"the record of {rec.get('name')!r} on {rec['zoo'].get('name')!r} holds no per-model "
                            "values to re-score from; regenerate it with `genbench leaderboard run`")
    x = np.array([[np.nan if v is None else v for v in (row if kind == "signature" else [row])] for row in value],
                 dtype=float)
    cols = {name: x[:, 0]} if kind != "signature" else {f"{name}[{i}]": x[:, i] for i in range(x.shape[1])}
    df = pd.DataFrame({"model_id": [str(m) for m in ids], **cols})
    return df.sort_values("model_id", kind="stable").reset_index(drop=True)


def _stamp(prov: Mapping[str, Any], command: str, **changed: Any) -> dict[str, Any]:
    """The provenance, with when and by which genbench the scores were recomputed."""
    return {**prov, **changed, "rescored": {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                            "genbench_version": __version__, "git_commit": git_commit(),
                                            "command": command}}


def rescore_record(rec: Mapping[str, Any], zoo: Zoo, *, command: str = "genbench leaderboard rescore"
                   ) -> dict[str, Any]:
    """A measure's record with its scores recomputed by this genbench from its stored values (schema 2 or current)."""
    from ..scoring.scores import score
    if rec.get("baseline") is True:
        raise GenbenchError("a baseline row is re-made with rescore_baselines, from its zoo and its inputs' records")
    if rec.get("status") != "ok":
        return {**rec, "schema": SCHEMA}
    prov = rec.get("provenance") or {}
    old = rec.get("scores") or {}
    values = value_table(rec)
    name = rec["measure"]
    values.attrs["measures"] = {name: {"kind": rec.get("kind"), "transform": old.get("transform"),
                                       "higher_means": rec.get("higher_means")}}
    seed, n_boot = int(prov.get("seed", 0)), int(prov.get("n_boot", 1000))
    s = score(values, zoo, target=old.get("target", "gap"), measures=[name], seed=seed, n_boot=n_boot,
              allow_partial=not zoo.complete)[name]
    scores = s.to_dict()
    scores["notes"] = scores["notes"] + [n for n in old.get("notes", []) if n.startswith(NO_AUDIT)
                                         or n.startswith("provisional:")]
    v = rec["values"]
    vals = values_block(v["model_id"], v["gap"], v["value"], v.get("error"), _in_record_order(s, values, v))
    out = {**rec, "schema": SCHEMA, "scores": scores, "values": vals, "provenance": _stamp(prov, command)}
    parts = (rec.get("trainings") or {}).get("zoos") or []
    zoos, per, per_values = [zoo], [s], [v["value"]]
    for part in parts[1:]:  # each later training re-scored from its own stored values, on training 0's resamples
        z = _training_zoo(part)
        t_values = value_table({**rec, "values": {"model_id": v["model_id"], "value": part.get("value")}})
        t_values.attrs["measures"] = values.attrs["measures"]
        zoos.append(z)
        per.append(score(t_values, z, target=old.get("target", "gap"), measures=[name], seed=seed, n_boot=n_boot,
                         resample_table=zoo.table_sha256)[name])
        per_values.append(part.get("value"))
    block, verdicts = trainings_block(zoos, per, seed=seed, n_boot=n_boot, values=per_values)
    out["scores"]["verdicts"] = verdicts
    if len(zoos) > 1:
        out["trainings"] = block
    return out


def _training_zoo(part: Mapping[str, Any]) -> Zoo:
    """A later training's zoo, by the name its part of the record gives, checked against the table hash it cites."""
    from ..zoo.storage import load_zoo
    name = str(part.get("name"))
    z = load_zoo(name)
    if z.table_sha256 != part.get("table_sha256"):
        raise GenbenchError(f"the zoo {name!r} built here (table {z.table_sha256[:12]}) is not the training the record "
                            f"was scored on (table {str(part.get('table_sha256'))[:12]}): rebuild it with `genbench "
                            "zoo build` (a clean build of the same genbench reproduces it)")
    return z


def _in_record_order(s: Any, values: pd.DataFrame, v: Mapping[str, Any]) -> Any:
    """The held-out predictions [R, n] in the order of the record's model ids (the scorer's is model-id order)."""
    where = {m: i for i, m in enumerate(values["model_id"])}
    return None if s.heldout is None else s.heldout[:, [where[str(m)] for m in v["model_id"]]]


def rescore_baselines(zoo: Zoo, records: Mapping[str, Mapping[str, Any]], folder: str | Path, *,
                      command: str = "genbench leaderboard rescore") -> list[dict[str, Any]]:
    """The baseline rows of a zoo re-made (their old `records` by name): baseline.all_measures from the values
    stored in the records, in `folder`, of the measures it was made from (provenance.inputs)."""
    from ..scoring.baselines import BASELINES, score_baselines
    wanted = tuple(records)
    inputs = list((records.get("baseline.all_measures", {}).get("provenance") or {}).get("inputs") or [])
    first = next(iter(records.values()))
    parts = (first.get("trainings") or {}).get("zoos") or [{}]
    zoos = [zoo] + [_training_zoo(part) for part in parts[1:]]
    raws = {}
    if "baseline.all_measures" in wanted:
        for name in inputs:
            path = Path(folder) / f"{name}.json"
            if not path.is_file():
                raise GenbenchError(f"baseline.all_measures on {zoo.name} was made from {name}, whose record "
                                    f"{path} is missing: re-score it from a folder holding its inputs' records")
            raws[name] = _raw(path)
    any_prov = first.get("provenance") or {}
    seed, n_boot = int(any_prov.get("seed", 0)), int(any_prov.get("n_boot", 1000))
    per = []
    for t, z in enumerate(zoos):
        values = None
        if "baseline.all_measures" in wanted:
            values = pd.DataFrame({"model_id": sorted(z.table["model_id"].astype(str))})
            for name, raw in raws.items():
                if raw.get("status") == "failed":  # failed on every model: the all-missing column it was made with
                    values[name] = np.nan
                    continue
                if t:  # a later training's values, stored in the input's trainings block
                    held = ((raw.get("trainings") or {}).get("zoos") or [])
                    raw = {**raw, "values": {"model_id": raw["values"]["model_id"],
                                             "value": held[t].get("value") if t < len(held) else None}}
                values = values.merge(value_table(raw), on="model_id", how="left")
        per.append(score_baselines(z, values, measures=inputs, seed=seed, n_boot=n_boot, only=wanted,
                                   resample_table=None if t == 0 else zoo.table_sha256))
    scores, notes = per[0]
    citation = {b.name: b.citation for b in BASELINES}
    order = {m: i for i, m in enumerate(sorted(zoo.table["model_id"].astype(str)))}  # the scorer's row order
    out = []
    for name in wanted:
        rec, s = records[name], scores.items.get(name)
        if s is None:
            raise GenbenchError(f"{name} on {zoo.name} could not be re-made: {'; '.join(notes)}")
        v = rec["values"]
        heldout = s.heldout[:, [order[str(m)] for m in v["model_id"]]]
        new = dict(rec)
        d = s.to_dict()
        d["notes"] = d["notes"] + [n for n in (rec.get("scores") or {}).get("notes", []) if n.startswith("provisional:")]
        new.update(schema=SCHEMA, citation=citation[name], scores=d,
                   values=values_block(v["model_id"], v["gap"], None, None, heldout),
                   provenance=_stamp(rec.get("provenance") or {}, command,
                                     measure_source_hash=baselines_source_hash()))
        every = [p[0].items.get(name) for p in per]
        if len(zoos) > 1 and all(e is not None for e in every):
            new["trainings"] = trainings_block(zoos, every, seed=seed, n_boot=n_boot)[0]
        out.append(new)
    return out


def rescore_folder(root: str | Path, *, zoo: str | None = None, zoo_path: str | Path | None = None,
                   say: Callable[[str], None] = print) -> list[Path]:
    """Re-score every record under ROOT (or ROOT/<zoo>) in place (atomic writes); returns the files written. Each
    zoo is the one its records cite, found by table hash (`zoo_path`: a copy of it)."""
    root = Path(root)
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if zoo:
        if not any((root / zoo).glob("*.json")):  # a mistyped zoo would re-score nothing, silently
            raise did_you_mean(zoo, [f.name for f in folders if any(f.glob("*.json"))],
                               what=f"zoo with records in {root}")
        folders = [root / zoo]
    written: list[Path] = []
    for folder in folders:
        files = sorted(folder.glob("*.json"))
        if not files:
            continue
        raws = {p: _raw(p) for p in files}
        first = next(iter(raws.values()))
        if Record(first).external:  # a table from elsewhere: `genbench score --values FILE` scores it again
            say(f"skipped {folder.name}: external values (score the table again with `genbench score --values`)")
            continue
        z, why = cited_zoo(Record(first), zoo_path)
        if why:
            raise GenbenchError(f"cannot re-score the records in {folder}: {why}")
        baselines = {r["name"]: r for r in raws.values() if r.get("baseline") is True and r.get("status") == "ok"}
        written += [write_record({**r, "schema": SCHEMA}, root) for r in raws.values()
                    if r.get("baseline") is True and r.get("status") != "ok"]
        measures = [(p, r) for p, r in raws.items() if r.get("baseline") is not True]
        for i, (p, r) in enumerate(measures, 1):
            if r["zoo"].get("table_sha256") != z.table_sha256:
                raise GenbenchError(f"{p} cites another table of {z.name} than its folder's first record")
            say(f"[{i}/{len(measures)}] {folder.name}/{p.name}")
            written.append(write_record(rescore_record(r, z), root))
        if baselines:
            say(f"baselines on {folder.name}: {', '.join(sorted(baselines))}")
            written += [write_record(b, root) for b in rescore_baselines(z, baselines, folder)]
    return written
