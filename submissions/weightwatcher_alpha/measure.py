"""Heavy-tailed self-regularization (Martin & Mahoney): the power-law exponent alpha of each layer's
empirical spectral density, fitted by the `weightwatcher` package and averaged over the layers."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
from typing import Any

import numpy as np
import torch

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


def as_conv2d(model: torch.nn.Module) -> torch.nn.Module:
    """The model as weightwatcher 0.7 can read it: each Conv1d kernel (out, in, k) as a Conv2d kernel (out, in, 1, k),
    whose k slices weightwatcher pools into one spectrum as it does a 2-D kernel's (it fits no Conv1d layer); a
    model without Conv1d layers is returned as it is."""
    if not any(isinstance(m, torch.nn.Conv1d) for m in model.modules()):
        return model
    layers = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv1d):
            conv = torch.nn.Conv2d(m.in_channels, m.out_channels, (1, m.kernel_size[0]), groups=m.groups, bias=False)
            conv.weight.data = m.weight.detach().unsqueeze(2).clone()
            layers.append(conv)
        elif isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
            layers.append(m)
    return torch.nn.Sequential(*layers)


def layer_alphas(model: Any) -> np.ndarray:
    """weightwatcher's power-law alpha of every Linear / Conv layer it can fit (NaN-free)."""
    ww = _weightwatcher()
    with contextlib.redirect_stdout(io.StringIO()):  # its small-sample fit prints to stdout
        details = ww.WeightWatcher(model=as_conv2d(model)).analyze(min_evals=8, plot=False, randomize=False, mp_fit=False)
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
