"""Loading Hugging Face image-classification datasets from local folders (save_to_disk and Hub parquet layout), offline."""
from __future__ import annotations


import numpy as np
import pytest
import torch

datasets = pytest.importorskip("datasets")
PIL_Image = pytest.importorskip("PIL.Image")

from genbench.errors import GenbenchError
from genbench.zoo.hf_images import ImageData, load_image_classification, to_float

NAMES = ["cat", "dog", "frog"]
N_TRAIN, N_TEST, SIDE = 20, 8, 8


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Force offline mode even if datasets/huggingface_hub were imported before the env vars were set."""
    import huggingface_hub.constants as hub_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)


def _pixels(n: int, seed: int, mode: str = "RGB", side: int = SIDE) -> np.ndarray:
    """Known random pixels, N x H x W x C (C omitted for "L")."""
    shape = (n, side, side) if mode == "L" else (n, side, side, 3)
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _split(pix: np.ndarray, labels: np.ndarray, features) -> "datasets.Dataset":
    """One split whose "img" column holds PIL images of `pix`."""
    data = {"img": [PIL_Image.fromarray(p) for p in pix]}
    for name in features:
        if name != "img":
            data[name] = labels.tolist() if name in ("label", "fine_label") else (labels % 2).tolist()
    return datasets.Dataset.from_dict(data, features=features)


def _truth(mode: str = "RGB"):
    """Pixels and labels written by the fixtures."""
    x_tr, x_te = _pixels(N_TRAIN, 0, mode), _pixels(N_TEST, 1, mode)
    y_tr = np.arange(N_TRAIN) % len(NAMES)
    y_te = (np.arange(N_TEST) + 1) % len(NAMES)
    return x_tr, y_tr, x_te, y_te


def _dataset_dict(mode: str = "RGB", label_names=("label",)) -> "datasets.DatasetDict":
    feats = {"img": datasets.Image()}
    for name in label_names:
        feats[name] = datasets.ClassLabel(names=NAMES if name != "coarse_label" else ["even", "odd"])
    features = datasets.Features(feats)
    x_tr, y_tr, x_te, y_te = _truth(mode)
    return datasets.DatasetDict(train=_split(x_tr, y_tr, features), test=_split(x_te, y_te, features))


@pytest.fixture
def disk_dir(tmp_path):
    """A DatasetDict written with save_to_disk."""
    out = tmp_path / "saved"
    _dataset_dict().save_to_disk(str(out))
    return out


@pytest.fixture
def parquet_dir(tmp_path):
    """The same data as parquet files in the Hub repo layout (data/{split}-00000-of-00001.parquet)."""
    out = tmp_path / "repo"
    (out / "data").mkdir(parents=True)
    for split, ds in _dataset_dict().items():
        ds.to_parquet(str(out / "data" / f"{split}-00000-of-00001.parquet"))
    return out


def _check_rgb(data: ImageData):
    x_tr, y_tr, x_te, y_te = _truth()
    assert data.x_train.dtype == torch.uint8 and data.y_train.dtype == torch.int64
    assert tuple(data.x_train.shape) == (N_TRAIN, 3, SIDE, SIDE)
    assert tuple(data.x_test.shape) == (N_TEST, 3, SIDE, SIDE)
    np.testing.assert_array_equal(data.x_train.permute(0, 2, 3, 1).numpy(), x_tr)
    np.testing.assert_array_equal(data.x_test.permute(0, 2, 3, 1).numpy(), x_te)
    np.testing.assert_array_equal(data.y_train.numpy(), y_tr)
    np.testing.assert_array_equal(data.y_test.numpy(), y_te)
    assert data.num_classes == 3 and data.class_names == NAMES
    assert data.source["image_column"] == "img" and data.source["label_column"] == "label"


def test_save_to_disk_layout_roundtrips(disk_dir):
    data = load_image_classification(str(disk_dir))
    _check_rgb(data)
    assert data.source["kind"] == "save_to_disk" and data.source["path"] == str(disk_dir)


def test_parquet_hub_layout_roundtrips(parquet_dir, tmp_path):
    data = load_image_classification(str(parquet_dir), cache_dir=str(tmp_path / "cache"))
    _check_rgb(data)
    assert data.source["kind"] == "local_files"
    assert (data.source["train_split"], data.source["test_split"]) == ("train", "test")


def test_image_data_is_frozen(disk_dir):
    data = load_image_classification(str(disk_dir))
    with pytest.raises(Exception):
        data.num_classes = 7  # type: ignore[misc]


def test_cifar100_like_prefers_fine_label_and_accepts_coarse(tmp_path):
    out = tmp_path / "c100"
    _dataset_dict(label_names=("coarse_label", "fine_label")).save_to_disk(str(out))
    fine = load_image_classification(str(out))
    assert fine.source["label_column"] == "fine_label"
    assert fine.class_names == NAMES and fine.num_classes == 3
    np.testing.assert_array_equal(fine.y_train.numpy(), _truth()[1])
    coarse = load_image_classification(str(out), label_column="coarse_label")
    assert coarse.source["label_column"] == "coarse_label"
    assert coarse.class_names == ["even", "odd"] and coarse.num_classes == 2
    np.testing.assert_array_equal(coarse.y_train.numpy(), _truth()[1] % 2)


def test_grayscale_keeps_one_channel(tmp_path):
    out = tmp_path / "gray"
    _dataset_dict(mode="L").save_to_disk(str(out))
    data = load_image_classification(str(out))
    assert tuple(data.x_train.shape) == (N_TRAIN, 1, SIDE, SIDE)
    np.testing.assert_array_equal(data.x_train[:, 0].numpy(), _truth("L")[0])
    assert data.source["image_mode"] == "L"


def test_mixed_sizes_are_rejected(tmp_path):
    feats = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=NAMES)})
    imgs = [PIL_Image.fromarray(p) for p in _pixels(3, 0)] + [PIL_Image.fromarray(_pixels(1, 2, side=6)[0])]
    ds = datasets.Dataset.from_dict({"img": imgs, "label": [0, 1, 2, 0]}, features=feats)
    out = tmp_path / "mixed"
    datasets.DatasetDict(train=ds, test=ds).save_to_disk(str(out))
    with pytest.raises(GenbenchError, match=r"different sizes.*\(6, 6\)"):
        load_image_classification(str(out))


def test_unlabelled_examples_are_rejected(tmp_path):
    dd = _dataset_dict()
    test = dd["test"].cast_column("label", datasets.Value("int64")).map(lambda r: {"label": -1})
    test = test.cast_column("label", datasets.ClassLabel(names=NAMES))
    out = tmp_path / "unlabelled"
    datasets.DatasetDict(train=dd["train"], test=test).save_to_disk(str(out))
    with pytest.raises(GenbenchError, match=r"split 'test'.*outside 0\.\.2.*-1"):
        load_image_classification(str(out))


def test_missing_split_names_splits_present(disk_dir):
    with pytest.raises(GenbenchError, match=r"'validation'.*train, test|'validation'.*test, train") as e:
        load_image_classification(str(disk_dir), test_split="validation")
    assert "test_split" in str(e.value)


def test_unknown_columns_are_named(disk_dir):
    with pytest.raises(GenbenchError, match=r"'labl'.*Did you mean 'label'"):
        load_image_classification(str(disk_dir), label_column="labl")
    with pytest.raises(GenbenchError, match=r"'image'.*image_column"):
        load_image_classification(str(disk_dir), image_column="image")
    with pytest.raises(GenbenchError, match=r"'label' .*not datasets\.Image"):
        load_image_classification(str(disk_dir), image_column="label")


def test_missing_image_column_lists_columns(tmp_path):
    ds = datasets.Dataset.from_dict({"x": [1, 2], "label": [0, 1]},
                                    features=datasets.Features({"x": datasets.Value("int32"),
                                                                "label": datasets.ClassLabel(names=NAMES)}))
    out = tmp_path / "noimg"
    datasets.DatasetDict(train=ds, test=ds).save_to_disk(str(out))
    with pytest.raises(GenbenchError, match=r"no datasets\.Image column.*x \(Value\).*image_column"):
        load_image_classification(str(out))


def test_nonexistent_local_path(tmp_path):
    missing = tmp_path / "does-not-exist"
    with pytest.raises(GenbenchError, match="does-not-exist"):
        load_image_classification(str(missing))


def test_unreachable_hub_id_offline(tmp_path):
    with pytest.raises(GenbenchError, match=r"genbench-test/no-such-dataset.*(?i:hub).*HF_ENDPOINT") as e:
        load_image_classification("genbench-test/no-such-dataset", cache_dir=str(tmp_path / "cache"))
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_to_float_standardises_per_channel(disk_dir):
    data = load_image_classification(str(disk_dir))
    z = to_float(data.x_train)
    assert z.dtype == torch.float32 and z.shape == data.x_train.shape
    torch.testing.assert_close(z.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(z.std(dim=(0, 2, 3)), torch.ones(3), atol=1e-5, rtol=0)
    # test data reuses the training statistics, so it is not exactly standardised
    xf = data.x_train.float() / 255
    mean, std = xf.mean(dim=(0, 2, 3)), xf.std(dim=(0, 2, 3))
    zt = to_float(data.x_test, mean, std)
    torch.testing.assert_close(zt, (data.x_test.float() / 255 - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1))
