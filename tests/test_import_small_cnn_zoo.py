"""`genbench zoo import small-cnn-zoo`: a folder written in the Small CNN Zoo's layout (weights.npy, metrics.csv.gz,
layout.csv) becomes a zoo whose torch models give the logits of an independent numpy forward pass of the TensorFlow
weights; hyperparameters, accuracies and init checkpoints as recorded; a run with non-finite weights skipped and
counted; weight-only measures run and the others are refused in one line; bad folders refused with nothing written."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

import genbench as gb
from genbench.cli import app
from genbench.errors import GenbenchError
from genbench.zoo.importers.small_cnn_zoo import N_PARAMS, SEGMENTS, import_small_cnn_zoo

RUNS = 12
STEPS = (0, 20, 86)


def flat_vector(rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([rng.normal(0, 0.4, size=int(np.prod(s))) for _, _, s in SEGMENTS]).astype(np.float32)


def write_zoo(folder, *, runs: int = RUNS, nan_run: int | None = 3, seed: int = 0) -> pd.DataFrame:
    """A Small CNN Zoo folder of `runs` runs x STEPS checkpoints; run `nan_run` diverges (NaN final weights)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows, weights = [], []
    for r in range(runs):
        for step in STEPS:
            w = flat_vector(rng)
            if r == nan_run and step == 86:
                w[5] = np.nan
            weights.append(w)
            acc = float(rng.uniform(0.3, 0.9))
            rows.append({"config.activation": "relu" if r % 2 else "tanh", "config.b_init": "zeros",
                         "config.dataset": "mnist", "config.dnn_architecture": "cnn", "config.dropout": 0.0,
                         "config.epochs": 86, "config.epochs_between_checkpoints": 20,
                         "config.init_std": 0.01 * (r + 1), "config.l2reg": [0.0, 1e-4, 1e-3][r % 3],
                         "config.learning_rate": [0.01, 0.003][r % 2], "config.num_layers": 3, "config.num_units": 16,
                         "config.optimizer": "adam", "config.random_seed": 42, "config.train_fraction": 0.5,
                         "config.w_init": "he_normal", "modeldir": f"/xm/1234/{r + 1}/", "step": step,
                         "test_accuracy": acc - 0.1, "test_loss": 1.5, "train_accuracy": acc, "train_loss": 1.2})
    np.save(folder / "weights.npy", np.stack(weights))
    metrics = pd.DataFrame(rows)
    metrics.to_csv(folder / "metrics.csv.gz", index=False)
    offset, layout = 0, []
    for layer, part, shape in SEGMENTS:
        size = int(np.prod(shape))
        layout.append({"varname": f"sequential/{layer}/{part}:0", "start_idx": offset, "end_idx": offset + size,
                       "size": size, "shape": str(shape)})
        offset += size
    pd.DataFrame(layout).to_csv(folder / "layout.csv", index=False)
    assert offset == N_PARAMS == 4970
    return metrics


def numpy_forward(flat: np.ndarray, images: np.ndarray, activation: str) -> np.ndarray:
    """TensorFlow's network by hand: images [N, H, W, 1]; three 3x3 convolutions, stride 2, 'valid' padding, kernels
    [kh, kw, in, out]; global average pooling; dense [in, out]. Bias before kernel in the flat vector."""
    parts, offset = {}, 0
    for layer, part, shape in SEGMENTS:
        size = int(np.prod(shape))
        parts[(layer, part)] = flat[offset:offset + size].astype(np.float64).reshape(shape)
        offset += size
    act = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh}[activation]
    h = images.astype(np.float64)
    for layer in ("conv1", "conv2", "conv3"):
        k, b = parts[(layer, "kernel")], parts[(layer, "bias")]
        out_side = (h.shape[1] - 3) // 2 + 1
        out = np.zeros((h.shape[0], out_side, out_side, k.shape[3]))
        for i in range(out_side):
            for j in range(out_side):
                patch = h[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
                out[:, i, j, :] = np.einsum("nabc,abcd->nd", patch, k) + b
        h = act(out)
    return h.mean(axis=(1, 2)) @ parts[("dense", "kernel")] + parts[("dense", "bias")]


@pytest.fixture
def source(tmp_path):
    metrics = write_zoo(tmp_path / "mnist")
    return tmp_path / "mnist", metrics


def test_imported_models_give_the_tensorflow_networks_logits(source, tmp_path, home):
    folder, metrics = source
    zoo = import_small_cnn_zoo(folder, out=tmp_path / "zoo", progress=False)
    weights = np.load(folder / "weights.npy")
    assert len(zoo) == RUNS - 1 and zoo.manifest["imported"]["skipped"] == {"non-finite weights": 1}
    assert zoo.complete and zoo.name == "small-cnn-zoo-mnist"
    images = np.random.default_rng(1).uniform(-1, 1, size=(5, 28, 28, 1)).astype(np.float32)
    x = torch.from_numpy(images).permute(0, 3, 1, 2)
    t = zoo.table.set_index("model_id")
    for r in (0, 1, 4):
        mid, rows = str(r + 1), metrics.index[metrics["modeldir"] == f"/xm/1234/{r + 1}/"]
        final, init = (rows[list(metrics.loc[rows, "step"]).index(s)] for s in (86, 0))
        activation = metrics.loc[final, "config.activation"]
        want = numpy_forward(weights[final], images, activation)
        with torch.no_grad():
            got = zoo.load_model(mid)(x).double().numpy()
            got_init = zoo.load_model(mid, init=True)(x).double().numpy()
        assert np.allclose(got, want, atol=1e-4), mid
        assert np.allclose(got_init, numpy_forward(weights[init], images, activation), atol=1e-4)
        assert t.at[mid, "train_acc"] == pytest.approx(metrics.loc[final, "train_accuracy"])
        assert t.at[mid, "gap"] == pytest.approx(metrics.loc[final, "train_accuracy"] - metrics.loc[final, "test_accuracy"])
        assert t.at[mid, "hp.learning_rate"] == metrics.loc[final, "config.learning_rate"]
        assert t.at[mid, "hp.train_size"] == 30_000
    # the varied config.* columns; init_std (11 values, as a continuous draw would give) is a column, not an axis
    assert sorted(zoo.hparams) == ["activation", "l2reg", "learning_rate"]
    assert zoo.manifest["imported"]["continuous"] == ["init_std"] and t.at["1", "hp.init_std"] == pytest.approx(0.01)
    card = (zoo.root / "README.md").read_text()
    assert "no training data (the Small CNN Zoo ships no images" in card and "train_data" not in card
    assert t["train_indices_seed"].isna().all()


def test_weight_only_measures_run_and_data_measures_are_refused_in_one_line(source, tmp_path, home):
    folder, _ = source
    zoo = import_small_cnn_zoo(folder, out=tmp_path / "zoo", progress=False)
    weight_only = [m for m in gb.list_measures() if not {"train_data", "augment"} & set(gb.get_measure(m).needs)]
    assert len(weight_only) >= 10
    values = gb.evaluate([*weight_only, "margin.qrt_log"], zoo, progress=False, cache=False)
    for m in weight_only:  # the weight-only catalogue runs on every model
        assert values[f"{m}:error"].isna().all(), (m, values[f"{m}:error"].dropna().iloc[0])
    errors = set(values["margin.qrt_log:error"])
    assert len(errors) == 1 and "margin.qrt_log needs the training data, which zoo 'small-cnn-zoo-mnist' does " \
        "not have" in errors.pop()
    with pytest.raises(GenbenchError, match="has no training data"):
        zoo.train_data("1")
    from genbench.scoring.baselines import score_baselines
    scores, notes = score_baselines(zoo, only=("baseline.weight_stats",), n_boot=20, k=3, repeats=1)
    assert not notes and "kfold_r2" in scores["baseline.weight_stats"].values


def test_a_dataset_that_contradicts_the_metrics_is_refused(source, tmp_path):
    folder, _ = source
    with pytest.raises(GenbenchError, match="--dataset cifar10 but config.dataset says"):
        import_small_cnn_zoo(folder, dataset="cifar10", out=tmp_path / "zoo", progress=False)
    assert not (tmp_path / "zoo").exists()


def test_the_cli_imports_with_a_limit(source, tmp_path, home):
    folder, _ = source
    out = CliRunner().invoke(app, ["zoo", "import", "small-cnn-zoo", str(folder), "--limit", "3", "--out",
                                   str(tmp_path / "z3"), "--name", "scz3"])
    assert out.exit_code == 0, out.output
    zoo = gb.load_zoo(tmp_path / "z3")
    assert zoo.model_ids == ["1", "2", "3"] and zoo.name == "scz3" and zoo.complete


def plant_short_layout(folder):
    layout = pd.read_csv(folder / "layout.csv")
    layout.iloc[:-1].to_csv(folder / "layout.csv", index=False)


def plant_swapped_layout(folder):
    layout = pd.read_csv(folder / "layout.csv")
    layout.loc[0, "varname"], layout.loc[1, "varname"] = layout.loc[1, "varname"], layout.loc[0, "varname"]
    layout.to_csv(folder / "layout.csv", index=False)


def plant_short_metrics(folder):
    pd.read_csv(folder / "metrics.csv.gz").iloc[:-1].to_csv(folder / "metrics.csv.gz", index=False)


def plant_duplicate_step(folder):
    m = pd.read_csv(folder / "metrics.csv.gz")
    m.loc[1, "step"] = 0
    m.to_csv(folder / "metrics.csv.gz", index=False)


def plant_wrong_width(folder):
    np.save(folder / "weights.npy", np.load(folder / "weights.npy")[:, :-1])


def plant_no_metrics(folder):
    (folder / "metrics.csv.gz").unlink()


def _metrics(change):
    def plant(folder):
        m = pd.read_csv(folder / "metrics.csv.gz")
        change(m)
        m.to_csv(folder / "metrics.csv.gz", index=False)
    return plant


def plant_percent(m):  # accuracies in percent: the zoo's gaps were 10.0
    m["train_accuracy"] *= 100


def plant_blank_test_acc(m):  # every gap NaN
    m["test_accuracy"] = m["test_accuracy"].astype(object)
    m.loc[m["step"] == 86, "test_accuracy"] = None


def plant_negative_fraction(m):  # hp.train_size -120000
    m["config.train_fraction"] = -2.0


def plant_varied_train_size(m):  # written over by genbench's own train_size
    m["config.train_size"] = range(len(m))


def plant_blank_modeldir(m):  # an AttributeError before
    m["modeldir"] = m["modeldir"].astype(object)
    m.loc[4, "modeldir"] = None


def plant_bool_weights(folder):  # imported: checkpoints of 0 and 1
    np.save(folder / "weights.npy", np.load(folder / "weights.npy") > 0)


def plant_npz_weights(folder):  # an AttributeError before
    w = np.load(folder / "weights.npy")
    with open(folder / "weights.npy", "wb") as f:
        np.savez(f, w=w)


@pytest.mark.parametrize("plant, message", [
    (_metrics(plant_percent), "train_accuracy of run '/xm/1234/1/' at step 86 is 42.7"),
    (_metrics(plant_blank_test_acc), "test_accuracy of run '/xm/1234/1/' at step 86 is nan, not an accuracy in [0, 1]"),
    (_metrics(plant_negative_fraction), "config.train_fraction of run '/xm/1234/1/' at step 86 is -2.0, not a "
                                        "fraction"),
    (_metrics(plant_varied_train_size), "the column(s) ['config.train_size'] vary between runs"),
    (_metrics(plant_blank_modeldir), "metrics.csv.gz row 6: modeldir nan and step"),
    (plant_bool_weights, "holds an array of bool; the Small CNN Zoo's weights are one float array"),
    (plant_npz_weights, "holds NpzFile; the Small CNN Zoo's weights are one float array"),
    (plant_short_layout, "lists 7 tensors"),
    (plant_swapped_layout, "row 1 ('sequential/conv1/kernel:0'"),
    (plant_short_metrics, "has 35 rows but weights.npy has 36"),
    (plant_duplicate_step, "has step 0 twice"),
    (plant_wrong_width, "4970 parameters each"),
    (plant_no_metrics, "has no metrics.csv.gz"),
])
def test_bad_folders_are_refused_in_one_line_and_nothing_is_written(source, tmp_path, plant, message):
    folder, _ = source
    plant(folder)
    with pytest.raises(GenbenchError, match=None) as e:
        import_small_cnn_zoo(folder, out=tmp_path / "zoo", progress=False)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "zoo").exists() and not list(tmp_path.glob(".zoo.importing-*"))
