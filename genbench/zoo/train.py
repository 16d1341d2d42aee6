"""Training a zoo: many models of one shape trained at once as one stacked model (weights on a
leading model axis), each with its own init, data order, augmentation, learning rate, weight decay,
batchnorm statistics and dropout; plus the plain one-model torch.optim loop it must agree with."""
from __future__ import annotations

import copy
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from ..models import build_model, family_class
from .data import Pool, apply_augmentation, draw_augmentation, train_subset
from .recipe import ModelSpec

EVAL_BATCH = 1000


class SlowTrainingWarning(UserWarning):
    """A shape group trained through the generic (vmap) path: its family has no stacked forward."""


@dataclass
class Trained:
    """A trained model's final and initial weights and how its training ended."""

    spec: ModelSpec
    state: dict[str, torch.Tensor]
    init_state: dict[str, torch.Tensor]
    epochs: int
    steps: int
    converged: bool | None
    seconds: float


def full_arch(spec: ModelSpec, pool: Pool) -> dict[str, Any]:
    """The family config of a model: its recipe settings plus the data's input shape and classes."""
    return {**spec.arch, "in_shape": pool.in_shape, "num_classes": pool.num_classes}


def init_model(spec: ModelSpec, pool: Pool) -> nn.Module:
    """The model at initialisation, drawn from its own seed without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.init_seed)
        return build_model(spec.family, full_arch(spec, pool))


def group_key(spec: ModelSpec) -> str:
    """Models with equal keys can be trained as one stacked model."""
    per_model = getattr(family_class(spec.family), "per_model_settings", ())  # its stacked forward takes these per model
    arch = {k: v for k, v in spec.arch.items() if k not in per_model}
    t = spec.train
    return json.dumps([spec.family, arch, t["optimizer"], t["batch_size"], t["train_size"], t["epochs"],
                       t["lr_milestones"], t["lr_gamma"], t["stop"]], sort_keys=True, default=str)


def lr_factor(train: dict[str, Any], epoch: int) -> float:
    """Step decay: lr_gamma to the number of milestones reached."""
    return train["lr_gamma"] ** sum(epoch >= m for m in train["lr_milestones"])


@torch.no_grad()
def evaluate_model(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = EVAL_BATCH
                   ) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of `model` in eval mode (the zoo's recorded metrics)."""
    model.eval()
    device = next(model.parameters()).device
    correct, loss = 0, 0.0
    for i in range(0, len(y), batch_size):
        xb, yb = x[i:i + batch_size].to(device), y[i:i + batch_size].to(device)
        logits = model(xb)
        loss += F.cross_entropy(logits, yb, reduction="sum").item()
        correct += (logits.argmax(1) == yb).sum().item()
    return correct / len(y), loss / len(y)


class _Batches:
    """One model's data stream: its epoch permutations and augmentation, from its own generators."""

    def __init__(self, spec: ModelSpec, pool: Pool):
        self.idx, self.labels = train_subset(pool, train_size=spec.train["train_size"],
                                             label_noise=spec.train["label_noise"], data_seed=spec.data_seed)
        self.n = len(self.idx)
        self.bs = min(int(spec.train["batch_size"]), self.n)
        self.order = torch.Generator().manual_seed(spec.run_seed)
        self.aug = torch.Generator().manual_seed(spec.run_seed + 1)
        self.spec = spec
        self.kind = pool.kind

    @property
    def steps_per_epoch(self) -> int:
        return self.n // self.bs

    def epoch(self) -> torch.Tensor:
        return torch.randperm(self.n, generator=self.order)

    def draw(self, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
        t = self.spec.train
        return draw_augmentation(self.kind, shape, self.aug, shift=int(t["aug_shift"]), noise=float(t["aug_noise"]))

    def augmented(self, x: torch.Tensor) -> torch.Tensor:
        return apply_augmentation(x, self.kind, self.draw(tuple(x.shape))) if self.spec.train["augment"] else x


def _augment_stacked(xb: torch.Tensor, streams: list[_Batches], which: list[int]) -> torch.Tensor:
    """Augment the batches of the models in `which` at once, each with its own random numbers; `xb` (the
    step's own copy of the batch) may be written in place."""
    if not which:
        return xb
    draws = [streams[i].draw(tuple(xb.shape[1:])) for i in which]
    cat = {k: torch.cat([d[k] for d in draws]) for k in draws[0]}
    if len(which) == len(xb):
        return apply_augmentation(xb.flatten(0, 1), streams[0].kind, cat).view_as(xb)
    sel = torch.tensor(which, device=xb.device)
    out = apply_augmentation(xb[sel].flatten(0, 1), streams[0].kind, cat).view(len(which), *xb.shape[1:])
    return xb.index_copy_(0, sel, out)


def train_one(spec: ModelSpec, pool: Pool, device: str = "cpu") -> Trained:
    """Train a single model with the standard torch.optim loop (the reference for batched training)."""
    start = time.perf_counter()
    model = init_model(spec, pool)
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.to(device)
    t = spec.train
    if t["optimizer"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=t["lr"], weight_decay=t["weight_decay"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=t["lr"], momentum=t["momentum"], weight_decay=t["weight_decay"])
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=t["lr_milestones"], gamma=t["lr_gamma"])
    data = _Batches(spec, pool)
    x_pool = pool.x_train.to(device)
    steps, converged, epoch = 0, None, 0
    for epoch in range(1, int(t["epochs"]) + 1):
        model.train()
        perm = data.epoch()
        for b in range(data.steps_per_epoch):
            sel = perm[b * data.bs:(b + 1) * data.bs]
            xb = data.augmented(x_pool[data.idx[sel].to(device)])
            loss = F.cross_entropy(model(xb), data.labels[sel].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        sched.step()
        if t["stop"] is not None:
            acc, ce = evaluate_model(model, pool.x_train[data.idx], data.labels)
            converged = _met(t["stop"], acc, ce)
            if converged:
                break
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return Trained(spec, state, init_state, epoch, steps, converged, time.perf_counter() - start)


def _met(stop: dict[str, Any], acc: float, loss: float) -> bool:
    if stop["metric"] == "train_acc":
        return acc >= stop["threshold"]
    return loss <= stop["threshold"]


class _StackedOptimizer:
    """SGD with momentum or Adam over stacked weights, with a learning rate and weight decay per model.

    All parameters live in one flat (models, numbers) buffer, so a step is a handful of whole-buffer ops
    rather than a handful per parameter tensor. The update is torch.optim.SGD's / torch.optim.Adam's
    (L2 decay added to the gradient), element by element, so a stacked model follows the same trajectory
    as its one-model twin. The gradient is written into a flat buffer of the same layout (`grad`, with
    one view per parameter in `grads`), and every step reuses it, the optimizer state and one or two
    temporaries, all updated in place: blocks of this size freshly allocated at each step are handed back
    to the OS by glibc's default malloc and page-faulted in again at the next."""

    def __init__(self, flat: torch.Tensor, specs: list[ModelSpec], shapes: dict[str, torch.Size]):
        col = lambda key: torch.tensor([[float(s.train[key])] for s in specs], device=flat.device)  # noqa: E731
        self.kind = specs[0].train["optimizer"]
        self.lr, self.wd, self.mom = col("lr"), col("weight_decay"), col("momentum")
        self.decay = bool((self.wd != 0).any())
        self.shapes = shapes
        self.state: tuple[torch.Tensor, ...] | None = None
        self.t = 0
        self._use(flat)

    def _use(self, flat: torch.Tensor) -> None:
        self.flat = flat
        self.grad = torch.empty_like(flat)
        self.grads = _views(self.grad, self.shapes, grad=False)
        self._scratch: dict[str, torch.Tensor] = {}

    def keep(self, pos: torch.Tensor, flat: torch.Tensor) -> None:
        """Keep only the models at stack positions `pos` (the others have finished)."""
        self.lr, self.wd, self.mom = self.lr[pos], self.wd[pos], self.mom[pos]
        self.state = None if self.state is None else tuple(x[pos] for x in self.state)
        self._use(flat)

    def _buffer(self, name: str) -> torch.Tensor:
        """A scratch buffer shaped like the flat parameters, allocated once (again after `keep`)."""
        buf = self._scratch.get(name)
        if buf is None:
            buf = self._scratch[name] = torch.empty_like(self.flat)
        return buf

    def set_grads(self, grads: tuple[torch.Tensor, ...]) -> None:
        """Copy per-parameter gradients (in the flat layout's order) into `grad`."""
        torch.cat([x.flatten(1) for x in grads], 1, out=self.grad)

    @torch.no_grad()
    def step(self, factor: float) -> None:
        """One update from the gradient in `grad`, the learning rates scaled by `factor`."""
        self.t += 1
        p, g = self.flat, self.grad
        if self.decay:
            g.add_(torch.mul(self.wd, p, out=self._buffer("tmp")))
        lr = self.lr * factor
        if self.kind == "sgd":
            if self.state is None:  # the first momentum buffer is the gradient itself (torch.optim.SGD)
                buf = g.clone()
            else:
                buf = _flush_(self.state[0].mul_(self.mom).add_(g))
            self.state = (buf,)
            p.sub_(torch.mul(lr, buf, out=self._buffer("tmp")))
        else:
            b1, b2, eps = 0.9, 0.999, 1e-8
            if self.state is None:
                self.state = (torch.zeros_like(p), torch.zeros_like(p))
            m, v = self.state
            _flush_(m.lerp_(g, 1 - b1)), _flush_(v.mul_(b2).addcmul_(g, g, value=1 - b2))
            denom = torch.sqrt(v, out=self._buffer("denom")).div_((1 - b2 ** self.t) ** 0.5).add_(eps)
            p.sub_(torch.mul(lr / (1 - b1 ** self.t), m, out=self._buffer("tmp")).div_(denom))


def _flush_(x: torch.Tensor) -> torch.Tensor:
    """`x` with subnormal entries set to 0, in place (hardshrink at float `tiny`, written back into `x`).

    The momentum of a dead unit (gradient exactly 0) decays geometrically through subnormal floats, whose
    arithmetic is ~15x slower on CPU; torch.set_flush_denormal would only cover the calling thread, not the
    intra-op worker threads, and would make results depend on how work is split between threads."""
    return torch.ops.aten.hardshrink.out(x, torch.finfo(x.dtype).tiny, out=x)


def _views(flat: torch.Tensor, shapes: dict[str, torch.Size], grad: bool = True) -> dict[str, torch.Tensor]:
    """Tensors that share `flat`'s storage, one per parameter (updating `flat` updates them); leaves that
    require grad unless `grad` is False."""
    out, a = {}, 0
    for k, shape in shapes.items():
        n = shape.numel()
        out[k] = flat[:, a:a + n].view(len(flat), *shape).requires_grad_(grad)
        a += n
    return out


def _stacked_forward(specs: list[ModelSpec], model: nn.Module, device: str) -> Callable[..., torch.Tensor]:
    """forward(params, buffers, x (M, B, ...), train) -> logits (M, B, classes) for one group: the family's own
    stacked forward when it has one, else the module vmapped over the model axis."""
    if hasattr(model, "stacked_forward"):
        return model.stacked_forward([s.arch for s in specs], device)
    family = getattr(model, "family", type(model).__name__)
    warnings.warn(f"family {family!r} has no stacked forward: its models train through vmap, about as slowly as "
                  "one by one (give the family a stacked_forward, as models/stacked.py does for the CNNs)",
                  SlowTrainingWarning, stacklevel=2)
    base = copy.deepcopy(model).to("meta")

    def forward(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor, train: bool) -> torch.Tensor:
        base.train(train)
        return vmap(lambda pp, bb, xx: functional_call(base, (pp, bb), (xx,)), randomness="different")(p, b, x)

    return forward


def _stacked_gradient(specs: list[ModelSpec], model: nn.Module, device: str) -> Callable[..., Any] | None:
    """gradient(params, buffers, x (M, B, ...), y (M, B), grads) writing the training loss's gradient into `grads`
    (views of the optimizer's flat buffer) and updating batchnorm's running statistics in `buffers`, when the
    family computes it itself; else None (autograd)."""
    make = getattr(model, "stacked_gradient", None)
    return None if make is None else make([s.arch for s in specs], device)


class Stack:
    """The model side of a stacked group: every model's weights in one flat buffer (a view per parameter), its
    buffers stacked, the family's stacked forward and gradient, and the optimizer over the flat buffer."""

    def __init__(self, specs: list[ModelSpec], models: list[nn.Module], device: str):
        self.template = models[0]
        self.shapes = {k: p.shape for k, p in self.template.named_parameters()}
        states = [m.state_dict() for m in models]  # once per model: a state_dict detaches every tensor
        self.flat = torch.stack([torch.cat([sd[k].flatten() for k in self.shapes]) for sd in states]).to(device)
        self.params = _views(self.flat, self.shapes)
        self.buffers = {k: torch.stack([sd[k] for sd in states]).to(device) for k, _ in self.template.named_buffers()}
        self.opt = _StackedOptimizer(self.flat, specs, self.shapes)
        self.device = device
        self._compile(specs)

    def _compile(self, specs: list[ModelSpec]) -> None:
        self.forward = _stacked_forward(specs, self.template, self.device)
        self.gradient = _stacked_gradient(specs, self.template, self.device)

    def step(self, xb: torch.Tensor, yb: torch.Tensor, factor: float) -> None:
        """One training step of every model on its batch (xb (M, B, ...), yb (M, B)), learning rates x `factor`."""
        if self.gradient is not None:  # the family's own backward pass, into the optimizer's buffer
            self.gradient(self.params, self.buffers, xb, yb, self.opt.grads)
        else:
            logits = self.forward(self.params, self.buffers, xb, True)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1), reduction="sum") / yb.shape[1]
            self.opt.set_grads(torch.autograd.grad(loss, list(self.params.values())))
        self.opt.step(factor)

    def keep(self, pos: torch.Tensor, specs: list[ModelSpec]) -> None:
        """Keep only the models at stack positions `pos`, whose specs are `specs` (the others have finished)."""
        self.flat = self.flat[pos]
        self.params = _views(self.flat, self.shapes)
        self.buffers = {k: v[pos] for k, v in self.buffers.items()}
        self.opt.keep(pos, self.flat)
        self._compile(specs)

    @torch.no_grad()
    def train_metrics(self, x_pool: torch.Tensor, idx: torch.Tensor, labels: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-model accuracy and cross-entropy on its un-augmented training subset, eval mode."""
        m, n = idx.shape
        correct = torch.zeros(m, device=x_pool.device)
        loss = torch.zeros(m, device=x_pool.device)
        for i in range(0, n, EVAL_BATCH):
            xb = x_pool[idx[:, i:i + EVAL_BATCH].to(x_pool.device)]
            yb = labels[:, i:i + EVAL_BATCH]
            logits = self.forward(self.params, self.buffers, xb, False)
            loss += F.cross_entropy(logits.transpose(1, 2), yb, reduction="none").sum(1)
            correct += (logits.argmax(-1) == yb).sum(1)
        return (correct / n).cpu(), (loss / n).cpu()

    def model_state(self, slot: int) -> dict[str, torch.Tensor]:
        """The weights and buffers of the model at stack position `slot`, as a one-model state dict."""
        return {k: v[slot].detach().cpu().clone() for k, v in {**self.params, **self.buffers}.items()}


def train_group(specs: list[ModelSpec], pool: Pool, device: str = "cpu",
                on_epoch: Callable[[int], None] | None = None) -> list[Trained]:
    """Train models that share a `group_key` together as one stacked model; a model that meets the
    stopping rule is taken out of the stack (it stops costing time)."""
    start = time.perf_counter()
    t = specs[0].train
    models = [init_model(s, pool) for s in specs]
    init_states = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]
    stack = Stack(specs, models, device)
    streams = [_Batches(s, pool) for s in specs]
    idx = torch.stack([d.idx for d in streams])
    labels = torch.stack([d.labels for d in streams]).to(device)
    x_pool = pool.x_train.to(device)
    bs, steps_per_epoch, m_count = streams[0].bs, streams[0].steps_per_epoch, len(specs)
    alive = list(range(m_count))  # spec index of each slot of the stack
    augmenting = [i for i, s in enumerate(specs) if s.train["augment"]]
    done: dict[int, tuple[dict[str, torch.Tensor], int, int]] = {}
    steps, epoch = 0, 0
    with torch.random.fork_rng(devices=[device] if device.startswith("cuda") else []):
        torch.manual_seed(specs[0].run_seed)  # dropout masks of the group
        for epoch in range(1, int(t["epochs"]) + 1):
            factor = lr_factor(t, epoch - 1)
            perms = torch.stack([d.epoch() for d in streams])
            for b in range(steps_per_epoch):
                sel = perms[:, b * bs:(b + 1) * bs]
                rows = torch.gather(idx, 1, sel).view(-1).to(device)
                xb = x_pool.index_select(0, rows).view(*sel.shape, *x_pool.shape[1:])
                xb = _augment_stacked(xb, streams, augmenting)
                stack.step(xb, torch.gather(labels, 1, sel.to(device)), factor)
                steps += 1
            if on_epoch:
                on_epoch(len(alive))
            if t["stop"] is not None:
                acc, ce = stack.train_metrics(x_pool, idx, labels)
                for slot, i in enumerate(alive):
                    if _met(t["stop"], float(acc[slot]), float(ce[slot])):
                        done[i] = (stack.model_state(slot), epoch, steps)
                if len(done) == m_count:
                    break
                keep = [slot for slot, i in enumerate(alive) if i not in done]
                if len(keep) < len(alive):
                    alive = [alive[slot] for slot in keep]
                    pos = torch.tensor(keep, device=device)
                    stack.keep(pos, [specs[i] for i in alive])
                    streams = [streams[slot] for slot in keep]
                    idx, labels = idx[pos.cpu()], labels[pos]
                    augmenting = [slot for slot, i in enumerate(alive) if specs[i].train["augment"]]
    seconds = (time.perf_counter() - start) / m_count
    out = []
    for i, s in enumerate(specs):
        state, ep, st = done.get(i) or (stack.model_state(alive.index(i)), epoch, steps)
        converged = None if t["stop"] is None else i in done
        out.append(Trained(s, state, init_states[i], ep, st, converged, seconds))
    return out
