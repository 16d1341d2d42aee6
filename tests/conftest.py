"""Shared fixtures: an isolated GENBENCH_HOME and the tiny digits zoo, built once per session."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("genbench_home")
    mp.setenv("GENBENCH_HOME", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="session")
def digits_zoo(home):
    import genbench as gb

    return gb.build_zoo("digits-mlp", progress=False)


@pytest.fixture(scope="session")
def nin_zoo(home):
    """The tiny convolutional zoo (DEMOGEN's NiN in 1-D on digits), built once per session."""
    import genbench as gb

    return gb.build_zoo("digits-nin", progress=False)


@pytest.fixture
def temp_measures():
    """Register measures for one test and remove them afterwards."""
    names = []

    def register(name, **kw):
        names.append(name)
        from genbench import register_measure
        return register_measure(name, **kw)

    yield register
    from genbench.measures.registry import unregister_measure
    for n in names:
        unregister_measure(n)
