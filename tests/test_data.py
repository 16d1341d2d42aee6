"""Datasets, training subsets, label corruption and augmentation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from genbench.errors import GenbenchError
from genbench.zoo.data import augment, load_pool, train_subset


@pytest.fixture(scope="module")
def mnist1d():
    return load_pool({"name": "mnist1d", "num_samples": 1000, "train_split": 0.8, "seed": 3})


def test_mnist1d_is_generated_deterministically_without_touching_numpy_state(mnist1d):
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    again = load_pool({"name": "mnist1d", "num_samples": 1000, "train_split": 0.8, "seed": 3})
    assert np.array_equal(np.random.get_state()[1], before)
    assert torch.equal(again.x_train, mnist1d.x_train) and torch.equal(again.y_test, mnist1d.y_test)
    assert mnist1d.x_train.shape == (800, 40) and mnist1d.x_test.shape == (200, 40)
    assert set(mnist1d.y_train.tolist()) == set(range(10))


def test_digits_pool():
    pool = load_pool({"name": "digits", "test_fraction": 0.3})
    assert pool.x_train.shape == (1258, 64) and len(pool.y_test) == 539
    assert pool.kind == "signal" and pool.num_classes == 10


def test_unknown_dataset_and_argument():
    with pytest.raises(GenbenchError, match="Did you mean 'mnist1d'"):
        load_pool({"name": "mnist1"})
    with pytest.raises(GenbenchError, match="unknown generator argument"):
        load_pool({"name": "mnist1d", "samples": 10})


def test_subsets_are_nested_and_noise_is_shared(mnist1d):
    small_idx, small_y = train_subset(mnist1d, train_size=100, label_noise=0.2, data_seed=7)
    big_idx, big_y = train_subset(mnist1d, train_size=400, label_noise=0.2, data_seed=7)
    assert torch.equal(big_idx[:100], small_idx) and torch.equal(big_y[:100], small_y)
    other_idx, _ = train_subset(mnist1d, train_size=100, label_noise=0.2, data_seed=8)
    assert not torch.equal(other_idx, small_idx)


def test_corrupted_labels_are_wrong_at_the_stated_rate(mnist1d):
    idx, y = train_subset(mnist1d, train_size=None, label_noise=0.3, data_seed=1)
    wrong = (y != mnist1d.y_train[idx]).float().mean().item()
    assert 0.25 < wrong < 0.35
    idx0, y0 = train_subset(mnist1d, train_size=None, label_noise=0.0, data_seed=1)
    assert torch.equal(y0, mnist1d.y_train[idx0])
    with pytest.raises(GenbenchError, match="train_size 5000 is outside"):
        train_subset(mnist1d, train_size=5000, label_noise=0.0, data_seed=1)


def test_signal_augmentation_is_a_circular_shift_plus_noise():
    x = torch.arange(20.0).repeat(6, 1)
    out = augment(x, "signal", torch.Generator().manual_seed(0), shift=3, noise=0.0)
    shifts = set()
    for row_in, row_out in zip(x, out):
        matches = [s for s in range(-3, 4) if torch.equal(torch.roll(row_in, s), row_out)]
        assert len(matches) == 1
        shifts.add(matches[0])
    assert len(shifts) > 1
    noisy = augment(x, "signal", torch.Generator().manual_seed(0), shift=0, noise=0.5)
    assert 0.3 < (noisy - x).std().item() < 0.7


def test_image_augmentation_crops_and_flips():
    x = torch.rand(8, 3, 6, 6)
    out = augment(x, "image", torch.Generator().manual_seed(1), shift=0)
    for a, b in zip(x, out):
        assert torch.equal(a, b) or torch.equal(a.flip(-1), b)
    shifted = augment(x, "image", torch.Generator().manual_seed(1), shift=2)
    assert shifted.shape == x.shape and not torch.equal(shifted, x)
