"""The private training of a grid (issue 43, PGDL's private phase): a training index only the maintainers know (with a
random salt for the commitments records publish), and the zoo built from it, RECIPE-private, under
$GENBENCH_HOME/private: its checkpoints, table and gaps are never published, so no submission can look its answers up.

The secret is $GENBENCH_PRIVATE_TRAINING, else the file $GENBENCH_HOME/private/secret.json ({"training": K, "salt":
HEX}, mode 0600); the salt is made there the first time it is needed. K is never written to a record, a log, a page
or a zoo's name; the private folder as a whole (secret.json and the private zoos, whose seeds follow from K) stays on
the maintainers' machine, and every Hub upload refuses it (`refuse_private`)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from ..defaults import TRAININGS
from ..errors import GenbenchError
from ..fileio import atomic_write, read_capped, write_json_atomic
from ..paths import genbench_home

PRIVATE_ENV = "GENBENCH_PRIVATE_TRAINING"
SECRET_FILE = "secret.json"
PRIVATE_SUFFIX = "-private"
SECRET_MAX_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Secret:
    """The maintainers' private training index and salt (never shown: repr hides both)."""

    training: int = dataclasses.field(repr=False)
    salt: str = dataclasses.field(repr=False)

    def commitment(self, table_sha256: str) -> str:
        """sha256 hex of salt + table hash: names a private zoo without revealing it (the maintainers can show later
        which zoo it was by publishing the salt; without it, nobody can test a guessed table against it)."""
        return hashlib.sha256(f"{self.salt}{table_sha256}".encode()).hexdigest()


def private_dir() -> Path:
    """$GENBENCH_HOME/private: the secret and the private zoos, never published."""
    return genbench_home() / "private"


def secret_path() -> Path:
    """Where the secret is kept when the environment does not give it."""
    return private_dir() / SECRET_FILE


def private_name(grid: str) -> str:
    """The zoo name of a grid's private training: GRID-private (never the index)."""
    return f"{grid}{PRIVATE_SUFFIX}"


def private_zoo_dir(grid: str) -> Path:
    """The folder of a grid's private training: $GENBENCH_HOME/private/zoos/GRID-private."""
    return private_dir() / "zoos" / private_name(grid)


def how_to_set() -> str:
    """The sentence every 'no secret' message ends with."""
    return (f"set {PRIVATE_ENV} to a whole number >= {TRAININGS} that only the maintainers know (trainings "
            f"0..{TRAININGS - 1} are public), e.g. `export {PRIVATE_ENV}=$(python -c 'import secrets; "
            f"print({TRAININGS} + secrets.randbelow(10**9))')`, or write it as {{\"training\": K}} in {secret_path()} "
            "(mode 0600)")


def check_index(value: Any, where: str) -> int:
    """A private training index: a whole number >= TRAININGS; a public one (or anything else) is refused, saying so
    without echoing what was given."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GenbenchError(f"{where} is not a whole number >= {TRAININGS}: {how_to_set()}")
    if value < TRAININGS:
        raise GenbenchError(f"{where} names training {value}, which is public (trainings 0..{TRAININGS - 1} of every "
                            f"official grid are published): the private training must be another, >= {TRAININGS}")
    return value


def _stored() -> dict[str, Any]:
    """secret.json's content ({} when there is none); refused when others can read it."""
    path = secret_path()
    if not os.path.lexists(path):
        return {}
    data = read_capped(path, SECRET_MAX_BYTES, what="secret file")
    mode = os.stat(path).st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise GenbenchError(f"{path} can be read by others (mode {stat.S_IMODE(mode):o}): `chmod 600 {path}`")
    try:
        stored = json.loads(data.decode("utf-8"))
    except ValueError:
        raise GenbenchError(f"{path} is not JSON: it holds {{\"training\": K, \"salt\": \"HEX\"}}") from None
    if not isinstance(stored, dict):
        raise GenbenchError(f"{path} is not a JSON object: it holds {{\"training\": K, \"salt\": \"HEX\"}}")
    return stored


def _write_stored(stored: dict[str, Any]) -> None:
    """secret.json written atomically, readable by its owner only, in a folder only its owner can enter."""
    folder = private_dir()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)

    atomic_write(secret_path(), lambda tmp: tmp.write_text(json.dumps(stored) + "\n"), mode=0o600)


def load_secret(*, required: bool = True) -> Secret | None:
    """The maintainers' secret: the index from $GENBENCH_PRIVATE_TRAINING, else from secret.json; the salt from
    secret.json (made there, 0600, the first time). None when no index is set and not `required`; a GenbenchError
    naming how to set it when it is; a malformed or public index is refused either way."""
    env = os.environ.get(PRIVATE_ENV, "").strip()
    stored = _stored()
    if env:
        k = check_index(env, f"${PRIVATE_ENV}")
    elif "training" in stored:
        k = check_index(stored["training"], f"the training in {secret_path()}")
    elif required:
        raise GenbenchError(f"no private training is set: {how_to_set()}")
    else:
        return None
    salt = stored.get("salt")
    if not (isinstance(salt, str) and len(salt) >= 32 and all(c in "0123456789abcdef" for c in salt)):
        salt = secrets.token_hex(16)
        _write_stored({**stored, "salt": salt})
    return Secret(k, salt)


def is_private(folder: str | Path, manifest: dict[str, Any] | None = None) -> bool:
    """Whether a folder is (or lies in) the private folder, or holds a zoo marked private or named GRID-private."""
    root = Path(folder).resolve()
    inside = root == private_dir().resolve() or private_dir().resolve() in root.parents
    if manifest is None and (root / "zoo.json").is_file():
        try:
            manifest = json.loads((root / "zoo.json").read_text())
        except (OSError, ValueError):
            manifest = None
    marked = isinstance(manifest, dict) and (manifest.get("private") is True
                                             or str(manifest.get("name", "")).endswith(PRIVATE_SUFFIX))
    return inside or marked


def refuse_private(folder: str | Path, manifest: dict[str, Any] | None = None) -> None:
    """A GenbenchError when `folder` is private: the private training's checkpoints, table and gaps are never
    published (no `zoo push`, no Hub upload)."""
    if is_private(folder, manifest):
        raise GenbenchError(f"{folder} is a private training (or lies in {private_dir()}): its checkpoints, table and "
                            "gaps are never published, so that no submission can look its answers up; it is scored "
                            "only by `genbench leaderboard private` and `leaderboard add` (issue 43)")


def build_private_zoo(recipe: str | Path, *, limit: int | None = None, device: str | None = None,
                      overrides: dict[str, Any] | None = None, executor: str = "local", address: str | None = None,
                      progress: bool = True) -> Any:
    """Build (or finish building) the private training of `recipe`'s grid as GRID-private in private_zoo_dir(GRID):
    the same models and data as the public trainings, every training-noise seed changed by the secret index. The
    manifest is marked private and keeps no index (only the seeds in its table follow from it)."""
    from .build import build_zoo
    from .recipe import load_recipe
    from .storage import MANIFEST, Zoo
    secret = load_secret()
    r = load_recipe(recipe, overrides)
    grid = r.grid_name or r.name
    r = dataclasses.replace(r.with_training(secret.training), name=private_name(grid))
    root = private_zoo_dir(grid)
    root.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(private_dir(), 0o700)
    build_zoo(r, root, limit=limit, device=device, executor=executor, address=address, progress=progress)
    manifest = json.loads((root / MANIFEST).read_text())
    manifest.pop("training", None)
    write_json_atomic(root / MANIFEST, {**manifest, "training_of": grid, "private": True})
    return Zoo(root)


__all__ = ["PRIVATE_ENV", "Secret", "build_private_zoo", "check_index", "how_to_set", "is_private", "load_secret",
           "private_dir", "private_name", "private_zoo_dir", "refuse_private", "secret_path"]
