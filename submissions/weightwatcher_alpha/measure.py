"""Heavy-tailed self-regularization (Martin & Mahoney): the power-law exponent alpha of each layer's
empirical spectral density, fitted by the `weightwatcher` package and averaged over the layers."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
from typing import Any

import numpy as np

import genbench as gb

if importlib.util.find_spec("weightwatcher") is None:
    raise ImportError("this submission wraps the weightwatcher package: pip install 'weightwatcher>=0.7'")


def _weightwatcher() -> Any:
    """Import weightwatcher once, keeping its logging.basicConfig and import-time prints out of the process."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import weightwatcher
    root.handlers[:], root.level = handlers, level
    logging.getLogger("weightwatcher").setLevel(logging.WARNING)
    return weightwatcher


def layer_alphas(model: Any) -> np.ndarray:
    """weightwatcher's power-law alpha of every Linear / Conv layer it can fit (NaN-free)."""
    ww = _weightwatcher()
    with contextlib.redirect_stdout(io.StringIO()):  # its small-sample fit prints to stdout
        details = ww.WeightWatcher(model=model).analyze(min_evals=8, plot=False, randomize=False, mp_fit=False)
    alpha = details["alpha"].to_numpy(float) if len(details) else np.array([])
    return alpha[np.isfinite(alpha) & (alpha > 0)]


@gb.register_measure("spectral.ww_alpha", kind="scalar", citation="Martin & Mahoney 2021 (weightwatcher)",
                     version=1, higher_means="larger_gap", invariances=("relu_rescale",))
def ww_alpha(ctx: gb.MeasureContext) -> float:
    """Mean over layers of the power-law exponent alpha of the eigenvalues of W^T W (weightwatcher's fit)."""
    alphas = layer_alphas(ctx.model.cpu())
    if alphas.size == 0:
        raise gb.GenbenchError("weightwatcher could fit no layer of this model (every layer has fewer than "
                               "8 eigenvalues, or every fit failed)")
    return float(alphas.mean())
