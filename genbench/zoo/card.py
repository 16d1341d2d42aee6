"""The dataset card (README.md with YAML front matter) that makes a zoo a Hugging Face dataset."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .storage import Zoo


def summary(zoo: "Zoo") -> dict[str, float | int]:
    """Counts and ranges a person wants to see first: models (of the recipe's), accuracies and the gap."""
    t = zoo.table
    out: dict[str, float | int] = {"models": len(t), "expected_models": zoo.expected_models}
    for col in ("train_acc", "test_acc", "gap"):
        out[f"{col}_min"], out[f"{col}_max"] = float(t[col].min()), float(t[col].max())
    if t["converged"].notna().any():
        out["converged"] = int(t["converged"].fillna(False).astype(bool).sum())
    out["train_seconds"] = float(t["train_seconds"].sum())
    return out


def dataset_card(zoo: "Zoo", repo_id: str | None = None) -> str:
    """README.md for the zoo folder; the front matter lists models.parquet as the default config.
    With `repo_id` (the Hub repo it is pushed to) the code snippet loads it from there."""
    s = summary(zoo)
    count = s["models"] if zoo.complete else f"{s['models']} of the recipe's {s['expected_models']} (a partial zoo)"
    axes = "\n".join(f"| `{k}` | {', '.join(map(str, v))} |" for k, v in zoo.hparams.items())
    m = zoo.manifest
    if zoo.has_training_data:
        data_sentence = "the exact training data of each model, "
        data_line = "x, y = zoo.train_data(zoo.model_ids[0])           # exactly what it was trained on\n"
    else:  # an imported zoo of weights only (the Small CNN Zoo)
        data_sentence = f"no training data ({zoo.no_data_reason}), "
        data_line = ""
    return f"""---
configs:
- config_name: default
  data_files: models.parquet
tags:
- genbench
- model-zoo
- generalization
---
# {zoo.name}

{m.get('description', '').strip()}

A genbench model zoo: {count} trained `{zoo.table['family'].iloc[0]}` networks on
`{m['dataset'].get('path', m['dataset']['name'])}`, with final and initial weights (safetensors),
{data_sentence}and its measured train and test accuracy.

| | min | max |
|---|---|---|
| train accuracy | {s['train_acc_min']:.3f} | {s['train_acc_max']:.3f} |
| test accuracy | {s['test_acc_min']:.3f} | {s['test_acc_max']:.3f} |
| gap (train - test) | {s['gap_min']:.3f} | {s['gap_max']:.3f} |

| axis | values |
|---|---|
{axes}

```python
import genbench as gb
zoo = gb.load_zoo("{zoo.name if repo_id is None else 'hf://' + repo_id}")
model = zoo.load_model(zoo.model_ids[0])          # eval mode, checkpoint verified
{data_line}```

Built with genbench {m.get('genbench_version')} on {m.get('device')}; every file's sha256 is in `zoo.json`.
"""
