"""The worker's two channels. Requests: one JSON object per line on a pipe the parent writes and the worker reads,
one measure call each ({"task": K, "model": WHERE, "alpha", "budget_s", "seed"}), then {"end": true}. Results: one
JSON object per line on a pipe that only the parent reads (its file descriptor is the worker's last argument; the
worker's stdout is shown to the user and never parsed). Everything that arrives on the result channel is untrusted
input, because the submitted code runs in the worker's process and can write to any descriptor the worker holds:
`Protocol` checks each message's form and order, and the first one out of place ends the run.

Results, in order: {"stage": "importing measure.py"}; then {"failed": REASON} (the import failed) or {"ready":
METADATA}; then one {"task": K, ...} per request in order, K = 0, 1, ...: the raw outcome of one measure call
({"value": [...], "shape": [...]}, {"raised": [TYPE, MESSAGE]}, {"budget": MESSAGE} or {"invalid": REASON}) with
its "seconds"; then, once the parent ended the run, {"done": true}."""
from __future__ import annotations

import json
import math
import os
from typing import Any

from ...measures.registry import HIGHER_MEANS, INVARIANCES, KINDS, NEEDS, TRANSFORMS

MAX_LINE = 16 << 20  # bytes of one message at most
MAX_COMPONENTS = 100_000  # numbers in one measure value at most
MAX_TEXT = 4000  # characters of a reason, an error message or a citation at most
IMPORTING = "importing measure.py"
OUTCOMES = ("value", "raised", "budget", "invalid")


def send(fd: int, **message: Any) -> None:
    """Write one message (one line) to a channel: a result (the worker's side) or a request (the parent's)."""
    data = (json.dumps(message, allow_nan=True) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


class ProtocolError(ValueError):
    """A message on the result channel that the harness's worker would never send."""


def _text(x: Any, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(x, str) or len(x) > limit:
        raise ProtocolError(f"{what} is not a string of at most {limit} characters")
    return x


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_metadata(meta: Any) -> dict[str, Any]:
    """The measure's declared metadata from a "ready" message, checked against what register_measure accepts."""
    if not isinstance(meta, dict):
        raise ProtocolError("the measure's metadata is not an object")
    kind, needs, inv = meta.get("kind"), meta.get("needs"), meta.get("invariances")
    if kind not in KINDS:
        raise ProtocolError(f"kind {kind!r} is not one of {KINDS}")
    if not isinstance(needs, list) or not all(n in NEEDS for n in needs):
        raise ProtocolError(f"needs {needs!r} are not among {NEEDS}")
    if not isinstance(inv, list) or not all(i in INVARIANCES for i in inv):
        raise ProtocolError(f"invariances {inv!r} are not among {INVARIANCES}")
    if meta.get("transform") not in TRANSFORMS or meta.get("higher_means") not in HIGHER_MEANS:
        raise ProtocolError("transform or higher_means is not one register_measure accepts")
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ProtocolError(f"version {version!r} is not a positive integer")
    registered = meta.get("registered")
    if not isinstance(registered, list) or len(registered) > 1000:
        raise ProtocolError("the list of registered measures is malformed")
    return {"kind": kind, "needs": tuple(needs), "invariances": tuple(inv), "transform": meta["transform"],
            "higher_means": meta["higher_means"], "version": version,
            "citation": _text(meta.get("citation", ""), "citation"), "doc": _text(meta.get("doc", ""), "doc"),
            "registered": [_text(r, "a registered name", 200) for r in registered]}


def check_outcome(msg: dict[str, Any]) -> dict[str, Any]:
    """One task's outcome, checked: exactly one outcome key of the right form, and its seconds."""
    keys = [k for k in OUTCOMES if k in msg]
    if len(keys) != 1 or set(msg) - {"task", "seconds", "shape", *OUTCOMES}:
        raise ProtocolError(f"task {msg.get('task')} has keys {sorted(msg)}")
    key = keys[0]
    seconds = msg.get("seconds")
    if not _number(seconds) or not math.isfinite(seconds) or seconds < 0:
        raise ProtocolError(f"task {msg['task']}: seconds {seconds!r} is not a finite non-negative number")
    out: dict[str, Any] = {"seconds": float(seconds)}
    if key == "value":
        value, shape = msg["value"], msg.get("shape")
        if (not isinstance(shape, list) or len(shape) > 8
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_COMPONENTS
                           for d in shape)):
            raise ProtocolError(f"task {msg['task']}: shape {shape!r} is malformed")
        if not isinstance(value, list) or len(value) > MAX_COMPONENTS or not all(map(_number, value)):
            raise ProtocolError(f"task {msg['task']}: the value is not a list of at most {MAX_COMPONENTS} numbers")
        if math.prod(shape) != len(value):
            raise ProtocolError(f"task {msg['task']}: {len(value)} numbers do not fill shape {shape}")
        out.update(value=[float(v) for v in value], shape=shape)
    elif key == "raised":
        r = msg["raised"]
        if not isinstance(r, list) or len(r) != 2:
            raise ProtocolError(f"task {msg['task']}: 'raised' is not [type, message]")
        name = _text(r[0], "an exception's type name", 100)
        if not name.isidentifier():
            raise ProtocolError(f"task {msg['task']}: {name!r} is not an exception type name")
        out["raised"] = [name, _text(r[1], "an exception's message")]
    elif key == "budget":
        out["budget"] = _text(msg["budget"], "a budget message")
    else:
        out["invalid"] = _text(msg["invalid"], "why a value is refused")
    return out


class Protocol:
    """The parent's reading of the result channel: each line checked against the message expected next; the
    parent says when it asks for a call (`ask`) and when it asks for no more (`end`)."""

    def __init__(self) -> None:
        self.asked = 0  # calls requested so far
        self.ended = False  # the parent asked for no more calls
        self.importing = False  # the worker said it is importing measure.py
        self.failed: str | None = None  # why the import failed, as the worker said
        self.meta: dict[str, Any] | None = None  # the measure's metadata, once ready
        self.results: list[dict[str, Any]] = []  # the outcome of each task, in order
        self.done = False

    def ask(self) -> int:
        """Note one more request; its task number."""
        self.asked += 1
        return self.asked - 1

    def end(self) -> None:
        """Note that no more calls will be asked for: 'done' may come once every asked one is answered."""
        self.ended = True

    def feed(self, line: bytes) -> str:
        """Read one line; return what it was ('importing', 'failed', 'ready', 'task', 'done') or raise
        ProtocolError."""
        try:
            return self._feed(line)
        except ProtocolError:
            raise
        except (OverflowError, TypeError, ValueError, KeyError) as e:  # e.g. an integer too large for a float
            raise ProtocolError(f"a malformed message ({type(e).__name__}: {e}): {line[:80]!r}") from None

    def _feed(self, line: bytes) -> str:
        if len(line) > MAX_LINE or not line.endswith(b"\n"):
            raise ProtocolError(f"a message longer than {MAX_LINE} bytes, or cut short")
        try:
            msg = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ProtocolError(f"a line that is not JSON: {line[:80]!r}") from None
        if not isinstance(msg, dict):
            raise ProtocolError(f"a message that is not an object: {line[:80]!r}")
        if self.done or self.failed is not None:
            raise ProtocolError(f"a message after the end: {line[:80]!r}")
        if not self.importing:
            if msg != {"stage": IMPORTING}:
                raise ProtocolError(f"{line[:80]!r} before the worker started importing measure.py")
            self.importing = True
            return "importing"
        if self.meta is None:
            if set(msg) == {"failed"}:
                self.failed = _text(msg["failed"], "the reason of a failed import")
                return "failed"
            if set(msg) != {"ready"}:
                raise ProtocolError(f"{line[:80]!r} where the measure's metadata was expected")
            self.meta = check_metadata(msg["ready"])
            return "ready"
        if msg == {"done": True}:
            if len(self.results) != self.asked or not self.ended:
                raise ProtocolError(f"'done' after {len(self.results)} of {self.asked} tasks"
                                    + ("" if self.ended else ", before the run ended"))
            self.done = True
            return "done"
        k = msg.get("task")
        if k != len(self.results) or isinstance(k, bool):
            raise ProtocolError(f"a result for task {k!r} where task {len(self.results)} was expected")
        if k >= self.asked:
            raise ProtocolError(f"a result for task {k!r}, which was not asked for")
        self.results.append(check_outcome(msg))
        return "task"
