"""What a measure may see of one model: the model, its training data as trained, its init, a seeded
generator and a time budget. The zoo itself, test data and test metrics are never reachable from here."""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ..defaults import SEED
from ..errors import GenbenchError
from ..zoo.data import TrainingSet
from ..zoo.data import augment as _augment


class BudgetExceeded(RuntimeError):
    """Raised by `ctx.check_time()` when a measure has used up its time budget on one model."""


def derive_seed(*parts: Any) -> int:
    """A 63-bit seed derived from the parts' text, the same in every process."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big") >> 1


class MeasureContext:
    """Everything a measure may use on one model; undeclared needs raise a clear error."""

    def __init__(self, *, model: Callable[[], nn.Module] | nn.Module, probe_layers: list[str], device: str = "cpu",
                 measure: str = "measure", needs: tuple[str, ...] = (), seed: int = SEED,
                 budget_s: float | None = None, train: TrainingSet | None = None,
                 init_model: Callable[[], nn.Module] | nn.Module | None = None,
                 memo: dict[Any, Any] | None = None):
        self._model = model.eval() if isinstance(model, nn.Module) else model
        self.device = device
        self.probe_layers = list(probe_layers)
        self.measure = measure
        self.needs = tuple(needs)
        self.seed = int(seed)
        self.budget_s = budget_s
        self.generator = torch.Generator().manual_seed(derive_seed(seed, measure))
        self._train = train
        self._init = init_model
        self._memo = {} if memo is None else memo
        self._start = time.perf_counter()

    def _require(self, need: str) -> None:
        if need not in self.needs:
            raise GenbenchError(f"measure {self.measure!r} uses {need!r} but did not declare it: "
                                f"add needs=({need!r},) to its @register_measure")

    # --- time -------------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    @property
    def time_left(self) -> float:
        """Seconds left of the budget on this model (inf without a budget)."""
        return float("inf") if self.budget_s is None else self.budget_s - self.elapsed

    def check_time(self) -> None:
        """Call inside long loops: raises BudgetExceeded once the budget is spent."""
        if self.time_left < 0:
            raise BudgetExceeded(f"over its budget of {self.budget_s:g} s on this model")

    # --- weights ----------------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The trained model, eval mode, this measure's own (made on first use: a measure that only reads shared
        work never pays for the copy)."""
        if not isinstance(self._model, nn.Module):
            self._model = self._model().eval()  # once: a measure that sets another mode keeps it
        return self._model

    @property
    def init_model(self) -> nn.Module:
        """The model at its initial weights, eval mode, on `device` (needs 'init_weights')."""
        self._require("init_weights")
        if callable(self._init) and not isinstance(self._init, nn.Module):
            self._init = self._init()
        if self._init is None:
            raise GenbenchError("this zoo has no initial checkpoints, so measures that need init_weights cannot run")
        return self._init.eval()

    # --- training data ----------------------------------------------------------------------------
    @property
    def train(self) -> TrainingSet:
        self._require("train_data")
        if self._train is None:
            raise GenbenchError("no training data was given to this context")
        return self._train

    @property
    def num_classes(self) -> int:
        return int(self.train.num_classes)

    @property
    def num_train(self) -> int:
        return len(self.train.y)

    def train_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All training inputs and labels, as trained (corrupted labels included), on `device`."""
        t = self.train
        return t.x.to(self.device), t.y.to(self.device)

    def train_batches(self, batch_size: int = 1000) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The training set in order, in batches on `device`."""
        t = self.train
        for i in range(0, len(t.y), batch_size):
            yield t.x[i:i + batch_size].to(self.device), t.y[i:i + batch_size].to(self.device)

    def subsample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A fixed random subset of `n` training examples, the same for every measure on this model."""
        t = self.train
        if n >= len(t.y):
            return self.train_data()
        idx = torch.randperm(len(t.y), generator=torch.Generator().manual_seed(derive_seed(self.seed, "subsample")))
        idx = idx[:n].sort().values
        return t.x[idx].to(self.device), t.y[idx].to(self.device)

    def augment(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Randomly augment a batch the way the zoo's data kind is augmented (needs 'augment')."""
        self._require("augment")
        t = self._train
        kind = t.data_kind if t is not None else "signal"
        settings = t.augmentation if t is not None else {}
        return _augment(x, kind, generator or self.generator, **settings)

    # --- shared work ------------------------------------------------------------------------------
    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Work shared by several measures on this model (e.g. one pass for all margins), computed once."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def has_memo(self, key: Any) -> bool:
        """Whether the shared work `key` is already done on this model (a batched run may have done it)."""
        return key in self._memo
