"""The Hub paths against bad servers and bad repos: a server that never answers, a repo holding another zoo's files,
stray checkpoints, a local folder in the way of `zoo get`."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import genbench as gb
from genbench.zoo import hub as gbhub
from test_hub import go_online

WAIT = 20  # seconds a call against a silent server may take before the test calls it hung


def within(seconds: float, fn: Callable[[], Any]) -> BaseException | None:
    """Run fn in a daemon thread; the exception it raised (None: it returned), or fail the test if it hangs."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as e:  # noqa: BLE001  handed to the test
            box.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        pytest.fail(f"still waiting after {seconds} s: the call hangs on a server that never answers")
    return box[0]


@pytest.fixture
def silent(monkeypatch, tmp_path):
    """HF_ENDPOINT at a loopback socket that accepts connections and never answers; a 0.3 s Hub timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    go_online(monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "0.3")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    yield url
    sock.close()


def test_a_silent_server_is_one_line_not_a_hang(silent, digits_zoo, tmp_path, monkeypatch):
    start = time.monotonic()
    err = within(WAIT, lambda: gb.load_zoo("hf://genbench/x"))
    assert isinstance(err, gb.GenbenchError) and time.monotonic() - start < WAIT
    text = str(err)
    assert "\n" not in text and text.startswith(f"the server at {silent} does not answer")
    assert "check the network or HF_ENDPOINT" in text
    err = within(WAIT, lambda: gbhub.push_zoo(digits_zoo.root, "genbench/x"))  # the real HfApi
    assert isinstance(err, gb.GenbenchError), err
    assert str(err).startswith(f"the server at {silent} does not answer"), str(err)


def test_zoo_get_builds_when_the_hub_is_silent(silent, tmp_path, monkeypatch):
    import genbench.zoo.build as build
    monkeypatch.setenv("GENBENCH_HOME", str(tmp_path / "home"))
    notes: list[str] = []

    def fake_build(*args, **kwargs):
        raise RuntimeError("built")

    monkeypatch.setattr(build, "build_zoo", fake_build)
    err = within(WAIT, lambda: gbhub.get_zoo("digits-mlp", results=tmp_path / "none", note=notes.append))
    assert isinstance(err, RuntimeError) and str(err) == "built"
    assert len(notes) == 1 and "does not answer" in notes[0] and "built here instead" in notes[0]
