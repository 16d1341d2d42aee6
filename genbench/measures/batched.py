"""The flatness searches run on a stack of models of one shape at once (issue 41): every model keeps its own
search coroutine (pacbayes.gaussian_search / box_search: its bracket, stopping rule and generator stream), and each
round answers the requests of all of them in one stacked forward (and backward) of the family's stacked network
(the trainer's, models/stacked*.py), or the module vmapped over the model axis where the family has none. A
Gaussian search's accuracies are counted batch by batch, and stop being counted once the examples left could not
change what the search does with them (decided_gaussian_search).

The per-model path (pacbayes.pacbayes_sigma / sharpness_alpha) stays the definition. For Linear layers the stacked
products are the per-model ones, bit for bit; stacked convolutions sum in another order than oneDNN's, so a
decision may flip when a training accuracy sits on a threshold: the conformance suite and
benchmarks/catalogue.py compare the two paths' values."""
from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from .context import BudgetExceeded, MeasureContext
from .norm import folded_model
from .pacbayes import (EVAL_BATCH, SUBSAMPLE, TARGET_DROP, TOLERANCE, Accuracies, FlatModel, Gradient, Request,
                       box_search, gaussian_search, noise_generator)

CHUNK_BYTES = 16 << 20  # the largest activation of a stacked pass at most this big (below glibc's mmap threshold
#                         as the CLI sets it, harness/malloc.py: larger blocks are page-faulted in at every pass)
MAX_CHUNK = 64          # networks per stacked pass at most
Forward = Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor]
Decision = Callable[[list[float]], Any]


def _plain(template: nn.Module) -> nn.Module | None:
    """A copy of the BN-folded `template` whose family config says no batchnorm and no dropout (what the folded
    model computes in eval mode), for the family's stacked networks; None where the family has none."""
    config = getattr(template, "config", None)
    has_norm = any(isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)) for m in template.modules())
    if not hasattr(template, "stacked_forward") or not isinstance(config, dict) or has_norm:
        return None
    plain = copy.deepcopy(template)
    plain.config = {**config, "batchnorm": False, "dropout": 0.0}  # folded away; dropout is off in eval mode
    return plain


def stacked_forward(template: nn.Module, n: int, plain: nn.Module | None) -> Forward:
    """forward(params with a leading axis of n networks, x (n, B, ...)) -> logits (n, B, classes) of BN-folded
    models shaped like `template`, eval mode: the family's stacked forward (without batchnorm: folded away, `plain`
    = _plain(template)), else the module vmapped over the network axis."""
    if plain is not None:
        fwd = plain.stacked_forward([{"dropout": 0.0}] * n, str(next(template.parameters()).device))
        return lambda p, x: fwd(p, {}, x, False)
    base = copy.deepcopy(template).eval()
    return vmap(lambda p, xx: functional_call(base, p, (xx,)))


def stacked_loss_gradient(template: nn.Module, n: int, plain: nn.Module | None) -> Any | None:
    """The family's hand-written loss gradient of n stacked BN-folded networks shaped like `template` (`plain` =
    _plain(template)), where it has one that also returns the logits (`loss_gradient`: the 1-D NiN's,
    models/stacked_signals.py); None: autograd through `stacked_forward`."""
    make = getattr(plain, "stacked_gradient", None)
    net = None if make is None else make([{"dropout": 0.0}] * n, str(next(template.parameters()).device))
    return net if hasattr(net, "loss_gradient") else None


@torch.no_grad()
def widest(model: nn.Module, x: torch.Tensor) -> int:
    """The largest output (numbers per example) of any module of `model` on the one-example batch `x`."""
    sizes = [x[0].numel()]
    hooks = [m.register_forward_hook(lambda m, i, o: sizes.append(o[0].numel() if isinstance(o, torch.Tensor) else 0))
             for m in model.modules() if not list(m.children())]
    try:
        model(x)
    finally:
        for h in hooks:
            h.remove()
    return max(sizes)


class FlatStack:
    """FlatModels of one shape (BN-folded, same parameter names and shapes) and their training subsamples as one
    stacked network: each perturbed network is a row of flat weights and the index of the model whose other
    parameters and buffers (biases, unfolded batchnorms) it keeps. Passes take `chunk` networks at a time."""

    def __init__(self, fms: Sequence[FlatModel], xs: Sequence[torch.Tensor], ys: Sequence[torch.Tensor]):
        self.fms = list(fms)
        template = fms[0].model
        self.names, self.shapes = fms[0].names, fms[0].shapes

        def state(fm: FlatModel) -> dict[str, torch.Tensor]:  # what the weights leave: biases, unfolded batchnorms
            return {k: v.detach() for k, v in [*fm.model.named_parameters(), *fm.model.named_buffers()]
                    if k not in self.names}

        states = [state(fm) for fm in fms]
        self.others = {k: torch.stack([st[k] for st in states]) for k in states[0]}
        self.template = template
        self.plain = _plain(template)  # made once: the passes of each stack size share it
        same = all(torch.equal(x, xs[0]) and torch.equal(y, ys[0]) for x, y in zip(xs, ys))
        self.x, self.y = (xs[0], ys[0]) if same else (torch.stack(list(xs)), torch.stack(list(ys)))
        self.same_data = same
        self.n = len(ys[0])  # examples per model
        self._forwards: dict[int, Forward] = {}
        self._gradients: dict[int, Any] = {}
        self.chunk = max(1, min(MAX_CHUNK, CHUNK_BYTES // (min(self.n, EVAL_BATCH) * 4 * widest(template, xs[0][:1]))))

    def _forward(self, n: int) -> Forward:
        if n not in self._forwards:
            self._forwards[n] = stacked_forward(self.template, n, self.plain)
        return self._forwards[n]

    def _gradient(self, n: int) -> Any | None:
        if n not in self._gradients:
            self._gradients[n] = stacked_loss_gradient(self.template, n, self.plain)
        return self._gradients[n]

    def _weights(self, flats: torch.Tensor) -> dict[str, torch.Tensor]:
        """The weights of each network (row of `flats`) by name, as views of `flats`."""
        chunks = flats.split([int(torch.Size(s).numel()) for s in self.shapes], dim=1)
        return {k: c.view(len(flats), *s) for k, c, s in zip(self.names, chunks, self.shapes)}

    def _params(self, owners: torch.Tensor, flats: torch.Tensor) -> dict[str, torch.Tensor]:
        return {**self._weights(flats), **{k: v[owners] for k, v in self.others.items()}}

    def _data(self, owners: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs (n, B, ...) and labels (n, B) of batch i (EVAL_BATCH examples from i) for these networks."""
        n = len(owners)
        if self.same_data:
            x, y = self.x[i:i + EVAL_BATCH], self.y[i:i + EVAL_BATCH]
            return x.unsqueeze(0).expand(n, *x.shape), y.unsqueeze(0).expand(n, *y.shape)
        return self.x[owners, i:i + EVAL_BATCH], self.y[owners, i:i + EVAL_BATCH]

    @torch.no_grad()
    def accuracies(self, owners: torch.Tensor, flats: torch.Tensor,
                   decisions: Sequence[tuple[int, int, Decision | None]] = ()) -> list[float]:
        """Training accuracy of each network (row of `flats`, biases of model owners[k]), as FlatModel.accuracy,
        batch after batch. `decisions` (first row, end row, decision) are the requests' Decided.decision: once
        the accuracies that count the examples left as all right and as all wrong decide alike, those rows skip
        the batches left and get the all-wrong ones."""
        rows = len(owners)
        hits = torch.zeros(rows, self.n, dtype=torch.bool, device=flats.device)
        live = torch.ones(rows, dtype=torch.bool)
        for i in range(0, self.n, EVAL_BATCH):
            todo = live.nonzero().flatten()
            for a in range(0, len(todo), self.chunk):
                sel = todo[a:a + self.chunk] if len(todo) < rows else slice(a, a + self.chunk)
                own, fl = owners[sel], flats[sel]
                x, y = self._data(own, i)
                hits[sel, i:i + EVAL_BATCH] = self._forward(len(own))(self._params(own, fl), x).argmax(-1) == y
            if i + EVAL_BATCH < self.n:
                for first, end, decision in decisions:
                    if decision is not None and bool(live[first]):
                        counted = hits[first:end].float()
                        wrong = decision(counted.mean(1).tolist())
                        counted[:, i + EVAL_BATCH:] = 1.0
                        if wrong == decision(counted.mean(1).tolist()):
                            live[first:end] = False
        return hits.float().mean(1).tolist()

    def gradients(self, owners: torch.Tensor, us: torch.Tensor) -> list[tuple[torch.Tensor, float]]:
        """(gradient in u of the mean cross-entropy at w + u, accuracy there) per row of `us`, as loss_gradient."""
        out: list[tuple[torch.Tensor, float]] = []
        m = self.n
        for a in range(0, len(owners), self.chunk):
            own, u = owners[a:a + self.chunk], us[a:a + self.chunk]
            w = torch.stack([self.fms[int(k)].w for k in own])
            grad, correct = torch.zeros_like(u), torch.zeros(len(own), dtype=torch.long, device=u.device)
            net = self._gradient(len(own))  # the family's hand-written gradient (no autograd graph), else autograd
            if net is not None:  # the weights' gradients as views of one (networks, weights) buffer, biases left out
                p = self._params(own, w + u.detach())
                flat = torch.empty_like(u)
                grads = self._weights(flat)
            else:
                fwd = self._forward(len(own))
            for i in range(0, m, EVAL_BATCH):
                x, y = self._data(own, i)
                if net is not None:
                    logits = net.loss_gradient(p, {}, x, y, grads, per=m)
                    grad += flat
                else:
                    ui = u.detach().requires_grad_(True)
                    logits = fwd(self._params(own, w + ui), x)
                    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum") / m
                    grad += torch.autograd.grad(loss, ui)[0]
                correct += (logits.detach().argmax(-1) == y).sum(1)
            out += [(grad[k], int(correct[k]) / m) for k in range(len(own))]
        return out


def radius_decision(d: float) -> int:
    """What pacbayes.radius_steps does with a drop d, as it computes it: 0 below the target and outside the tolerance,
    1 and 2 within the tolerance below and above the target, 3 above and outside. Its path depends on nothing else,
    and the classes lie in this order along d, so two drops that bound a third from both sides and share a class
    fix it."""
    if abs(d - TARGET_DROP) <= TOLERANCE:
        return 1 if d <= TARGET_DROP else 2
    return 0 if d <= TARGET_DROP else 3


@dataclass
class Decided(Accuracies):
    """An Accuracies request whose search reads the accuracies only through decision(accuracies), which never falls
    (or never rises) as any one of them grows: FlatStack.accuracies may stop counting once the examples left could
    not change it, and reply with the accuracies that count every example left as wrong."""

    decision: Decision | None = None


def decided_gaussian_search(fm: FlatModel, generator: torch.Generator, magnitude: bool = False
                            ) -> Generator[Request, Any, float]:
    """pacbayes.gaussian_search, each radius's request carrying the decision its drop acc0 - mean(accuracies) makes
    (the search's own formula, here rather than in pacbayes.py, whose source hash the shipped records cite)."""
    search = gaussian_search(fm, generator, magnitude)
    request = next(search)
    (acc0,) = reply = yield request  # the trained model's accuracy: counted in full
    try:
        while True:
            request = search.send(reply)
            reply = yield Decided(request.weights, lambda accs: radius_decision(acc0 - float(np.mean(accs))))
    except StopIteration as done:
        return done.value


def run_searches(stack: FlatStack, searches: Sequence[Generator[Request, Any, float]],
                 check: Callable[[], None] = lambda: None) -> list[float | BaseException]:
    """Drive one search coroutine per model of `stack` (index i on stack.fms[i]), answering every pending request of
    a round in stacked passes; each model's result, or the exception its search raised."""
    results: dict[int, float | BaseException] = {}
    pending: dict[int, Request] = {}

    def advance(i: int, reply: Any = None, first: bool = False) -> None:
        try:
            pending[i] = next(searches[i]) if first else searches[i].send(reply)
        except StopIteration as done:
            results[i] = done.value
            pending.pop(i, None)
        except Exception as e:  # noqa: BLE001 - this model's failure, not the stack's
            results[i] = e
            pending.pop(i, None)

    for i in range(len(searches)):
        advance(i, first=True)
    while pending:
        check()
        replies: dict[int, Any] = {}
        accs = [(i, r) for i, r in pending.items() if isinstance(r, Accuracies)]
        if accs:
            owners = torch.tensor([i for i, r in accs for _ in range(len(r.weights))])
            ends = list(itertools.accumulate(len(r.weights) for _, r in accs))
            rows = [(end - len(r.weights), end, r.decision if isinstance(r, Decided) else None)
                    for end, (_, r) in zip(ends, accs)]  # each request's rows of the stacked pass
            values = stack.accuracies(owners, torch.cat([r.weights for _, r in accs]), rows)
            for (i, _), (first, end, _) in zip(accs, rows):
                replies[i] = values[first:end]
        grads = [(i, r) for i, r in pending.items() if isinstance(r, Gradient)]
        if grads:
            owners = torch.tensor([i for i, _ in grads])
            for (i, _), reply in zip(grads, stack.gradients(owners, torch.stack([r.u for _, r in grads]))):
                replies[i] = reply
        for i, reply in replies.items():
            advance(i, reply)
    return [results[i] for i in range(len(searches))]


SEARCHES = {"pacbayes.sigma": (decided_gaussian_search, False), "pacbayes.mag_sigma": (decided_gaussian_search, True),
            "sharpness.alpha": (box_search, False), "sharpness.mag_alpha": (box_search, True)}


def shape_key(model: nn.Module) -> tuple[Any, ...]:
    """Models with equal keys stack: the same class and the same parameter names and shapes."""
    return (type(model).__name__, tuple((k, tuple(p.shape)) for k, p in model.named_parameters()))


def prepare_search(key: str, ctxs: list[MeasureContext]) -> None:
    """The search `key` (pacbayes.sigma ...) for every model of `ctxs` at once, one stack per shape (of the folded
    models), each result put in its model's memo, where the per-model function finds it; a model whose search
    failed is left to the per-model path, which reports its failure."""
    search, magnitude = SEARCHES[key]
    todo = [c for c in ctxs if not c.has_memo(key)]
    groups: dict[tuple, list[tuple[MeasureContext, FlatModel]]] = {}
    for c in todo:
        fm = FlatModel(folded_model(c))
        groups.setdefault(shape_key(fm.model), []).append((c, fm))
    start = time.perf_counter()
    budget = sum(c.budget_s or float("inf") for c in todo)

    def check() -> None:
        if time.perf_counter() - start > budget:
            raise BudgetExceeded(f"the batched {key} search ran over its models' budgets together")

    for members in groups.values():
        if len(members) < 2:
            continue
        data = [c.subsample(SUBSAMPLE) for c, _ in members]
        stack = FlatStack([fm for _, fm in members], [x for x, _ in data], [y for _, y in data])
        coros = [search(fm, noise_generator(c, key), magnitude) for c, fm in members]
        for (c, _), value in zip(members, run_searches(stack, coros, check)):
            if not isinstance(value, BaseException):
                c.memo(key, lambda v=value: v)
