"""Measures defined in a file outside any package (a submission's measure.py): importing it registers them."""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path


def import_measure_file(path: Path) -> str:
    """Import a measure file under a module name unique to its path (so two submissions' measure.py never
    collide, and a second import is a no-op); return that name."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    mod_name = f"genbench_submission_{path.parent.name.replace('-', '_')}_{digest}"
    if mod_name in sys.modules:  # already imported (and its measures registered) in this process
        return mod_name
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)  # a failed import must not look imported next time
        raise
    return mod_name
