"""Template submission: copy this folder to submissions/NAME, rename the measure, write its body.

A measure is a function of a `gb.MeasureContext` that returns one number per model (kind="scalar") or a
1-D vector per model (kind="signature"). Register it with `@gb.register_measure` and name it in
submission.yaml's `entry`. The context gives you only what you declare in `needs`:

- `ctx.model`: the trained network (eval mode, on `ctx.device`); always available. It is your own copy.
- `ctx.train_data()`, `ctx.train_batches(n)`, `ctx.subsample(n)`: the exact training set the model was
  trained on, corrupted labels included (needs "train_data"). There is no test data: a measure that tries
  to read it is disqualified.
- `ctx.init_model`: the same network at its initial weights (needs "init_weights").
- `ctx.augment(x)`: the zoo's data augmentation (needs "augment").
- `ctx.generator`: a seeded torch.Generator; use it for all randomness so that runs are deterministic.
- `ctx.check_time()`: call it in long loops; the measure gets `ctx.budget_s` seconds per model.

For a quick try on the tiny zoo (built in seconds with `genbench zoo build digits-mlp`):
    genbench submit submissions/NAME --zoo digits-mlp --no-audit
The submission runs in a child process with a time budget per model and a memory cap; it must be
deterministic (same value twice under the same seed), finite, and of the same shape on every model.
"""
from __future__ import annotations

import torch

import genbench as gb


@gb.register_measure(
    "template.logit_margin",     # 'family.variant'; a name no other measure uses
    kind="scalar",               # "scalar" (one number per model) or "signature" (a vector per model)
    needs=("train_data",),       # what the context must give: "train_data", "init_weights", "augment"
    citation="genbench submission template",   # the paper the measure comes from (shown on the leaderboard)
    version=1,                   # bump it whenever the function's output changes (it keys the value cache)
    higher_means="smaller_gap",  # your hypothesis: "larger_gap", "smaller_gap" or None (fitted freely: "no claim")
    transform="select",          # phi before regressing: "log", "linear", or "select" (the scorer picks one per fold)
)
def logit_margin(ctx: gb.MeasureContext) -> float:
    """Median over training points of the output margin (true-class logit minus the largest other logit)."""
    margins = []
    with torch.no_grad():
        for x, y in ctx.train_batches(1000):
            logits = ctx.model(x)
            true = logits.gather(1, y[:, None])[:, 0]
            other = logits.scatter(1, y[:, None], float("-inf")).max(dim=1).values
            margins.append(true - other)
            ctx.check_time()
    return float(torch.cat(margins).median())
