"""Keras HDF5 weight files (`model.save_weights(...h5)` of Keras 2, or the `model_weights` group of `model.save`) read
with h5py: per layer, its weights by Keras name ('kernel', 'bias', 'gamma', ...)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import GenbenchError


def _names(attr: object) -> list[str]:
    return [n.decode() if isinstance(n, bytes) else str(n) for n in np.atleast_1d(attr)] if attr is not None else []


MAX_WEIGHTS = 1 << 30  # numbers in one weight tensor at most (4 GiB of float32): no network of a zoo holds more


def read_keras_weights(path: Path) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(layer name, {weight name: array}) of each layer that has weights, in the file's layer order (the order Keras
    loads them in); a file that is not a Keras weight file is a GenbenchError naming it."""
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise GenbenchError(f"{path} is not a readable HDF5 file ({e}); copy the task again") from None
    with f:
        group = f["model_weights"] if "layer_names" not in f.attrs and "model_weights" in f else f
        if "layer_names" not in group.attrs:
            raise GenbenchError(f"{path} is not a Keras HDF5 weight file (no 'layer_names' attribute); genbench reads "
                                "the HDF5 layout of Keras 2 (model.save_weights to a .h5/.hdf5 file)")
        layers = []
        try:
            for layer in _names(group.attrs["layer_names"]):
                g = group[layer]
                weights = {}
                for wname in _names(g.attrs.get("weight_names")):
                    short = wname.rsplit("/", 1)[-1].split(":", 1)[0]
                    data = g[wname]
                    if data.dtype.kind != "f" or data.size > MAX_WEIGHTS:  # ints, text; a declared 447 GiB
                        raise GenbenchError(f"{path}: weight {wname!r} of layer {layer!r} is {data.dtype} of "
                                            f"shape {data.shape}, not a float tensor of at most {MAX_WEIGHTS} "
                                            "numbers; export this model's weights again")
                    weights[short] = np.asarray(data)
                if weights:
                    layers.append((layer, weights))
        except GenbenchError:
            raise
        except (KeyError, TypeError, ValueError) as e:  # a layer or weight the file names but does not hold
            raise GenbenchError(f"{path} is not a whole Keras weight file ({type(e).__name__}: {e}); export this "
                                "model's weights again") from None
        return layers
