"""Output-layer measures (Jiang et al. 2020): the inverse squared 10th-percentile margin and the
prediction entropy, from one forward pass over the training set that other measures share."""
from __future__ import annotations

import numpy as np
import torch

from .context import MeasureContext
from .registry import register_measure

FANTASTIC = "Jiang, Neyshabur, Mobahi, Krishnan, Bengio 2020 (Fantastic generalization measures)"


@torch.no_grad()
def train_logits(ctx: MeasureContext) -> torch.Tensor:
    """Logits of the model on the whole training set (eval mode), computed once per model."""

    def compute() -> torch.Tensor:
        return torch.cat([ctx.model(x).float().cpu() for x, _ in ctx.train_batches()])

    return ctx.memo("train_logits", compute)


def output_margins(ctx: MeasureContext) -> np.ndarray:
    """f_y(x) - max_{j != y} f_j(x) for every training example (negative when misclassified)."""
    logits = train_logits(ctx)
    y = ctx.train.y
    true = logits.gather(1, y[:, None]).squeeze(1)
    other = logits.scatter(1, y[:, None], float("-inf")).amax(1)
    return (true - other).double().numpy()


def margin_gamma(ctx: MeasureContext) -> float:
    """gamma: the 10th percentile of the output margins over the training set (Jiang et al. 2020, eq. 22)."""
    return float(np.quantile(output_margins(ctx), 0.1))


@register_measure("output.margin_inv", needs=("train_data",), citation=FANTASTIC, higher_means="larger_gap")
def margin_inv(ctx: MeasureContext) -> float:
    """1 / gamma^2 with gamma the 10th-percentile output margin on the training set."""
    return 1.0 / margin_gamma(ctx) ** 2


@register_measure("output.entropy", needs=("train_data",), citation=FANTASTIC, higher_means="smaller_gap")
def entropy(ctx: MeasureContext) -> float:
    """Mean entropy -sum_k p_k log p_k of the softmax output over the training set."""
    logp = torch.log_softmax(train_logits(ctx).double(), dim=1)
    return float(-(logp.exp() * logp).sum(1).mean())
