"""The worker's progress protocol: one `@@genbench {json}` line on its stdout per stage, note or measure call,
which the parent reads to say what a crash happened during and to time each call against its budget."""
from __future__ import annotations

import json
import sys
from typing import Any

EVENT = "@@genbench "  # prefix of the worker's progress lines on its stdout


def emit(**event: Any) -> None:
    """Tell the parent about progress (a stage) or a measure call starting or ending."""
    sys.stdout.write(EVENT + json.dumps(event) + "\n")
    sys.stdout.flush()


def read_event(line: str) -> dict[str, Any]:
    """The event of a line that starts with EVENT; {} when what follows is not a JSON object."""
    try:
        ev = json.loads(line[len(EVENT):])
    except json.JSONDecodeError:
        ev = None
    return ev if isinstance(ev, dict) else {}
