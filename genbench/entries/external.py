"""Records of a value table from elsewhere: every measure column scored as a built-in is (k-fold R^2, tau, Psi, CMI,
robust sign-error, what it adds to the recipe), beside the baselines the hyperparameter columns give, on the same
folds and paired resamples; each record marked external (never verified, never ranked officially)."""
from __future__ import annotations

import time
from typing import Any

from ..defaults import N_BOOT, SEED
from ..record import baseline_record, external_record, provenance, values_block
from ..zoo.importers.value_table import ValueTable

TABLE_BASELINES = ("baseline.hparams", "baseline.hparams_main")  # the baselines a table without weights can give


def score_value_table(table: ValueTable, *, n_boot: int = N_BOOT, seed: int = SEED,
                      command: str = "") -> list[dict[str, Any]]:
    """The records of a value table's measure columns and of its recipe baselines."""
    from ..scoring import score
    from ..scoring.baselines import BASELINES, score_baselines

    start = time.perf_counter()
    zoo, values = table.zoo, table.values
    scores = score(values, zoo, measures=table.measures, n_boot=n_boot, seed=seed)
    base, notes = score_baselines(zoo, only=TABLE_BASELINES, seed=seed, n_boot=n_boot)
    seconds = time.perf_counter() - start
    ids = values["model_id"].astype(str).tolist()
    gap = zoo.table.set_index("model_id").loc[ids, "gap"].to_numpy(float).tolist()
    info = values.attrs["measures"]

    def prov() -> dict[str, Any]:
        return provenance(None, device="cpu", seconds=seconds, command=command, seed=seed, n_boot=n_boot,
                          audit_zoo=None)

    out = []
    for name in table.measures:
        s = scores[name]
        s.notes.append("external values: computed elsewhere, scored here; genbench cannot verify them")
        out.append(external_record(name, zoo, column=info[name]["column"], higher_means=info[name]["higher_means"],
                                   scores=s.to_dict(), prov=prov(),
                                   values=values_block(ids, gap, values[name].tolist(), None, s.heldout)))
    citation = {b.name: b.citation for b in BASELINES}
    for name in TABLE_BASELINES:
        s = base.items.get(name)
        reason = next((n for n in notes if "baseline.hparams" in n), f"{name} could not be made")  # one note for both
        out.append(baseline_record(name, citation[name], zoo, scores=None if s is None else s.to_dict(),
                                   failure=None if s is not None else reason, prov=prov(),
                                   values=None if s is None else values_block(ids, gap, None, None, s.heldout)))
    return out
