"""Zoos on the Hugging Face Hub: download them (every file checked against zoo.json, the commit recorded) and
publish them as dataset repos; also the Hub client plumbing that publishing result records reuses."""
from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..defaults import HUB_ORG, OFFICIAL_ZOOS, official_trainings
from ..errors import GenbenchError
from ..fileio import write_text_atomic
from ..version import __version__
from .card import dataset_card
from .private import refuse_private
from .storage import DATASET, MANIFEST, TABLE, Zoo, load_zoo

SCHEME = "hf://"
DEFAULT_REVISION = "main"
CARD = "README.md"
LARGE_UPLOAD_FILES = 2000          # above this many files (or bytes) a push uses upload_large_folder
LARGE_UPLOAD_BYTES = 20 * 2**30
PUSH_TIMEOUT_FACTOR = 10           # a push waits this many times hub_timeout() for an answer (commits take a while)
_BOUND: list[float] = []           # the timeout of the Hub calls under way, innermost last (none outside them)
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def parse_repo(repo: str) -> str:
    """`ORG/NAME` from `hf://ORG/NAME` or `ORG/NAME`; anything else is a clear error."""
    repo_id = repo[len(SCHEME):] if repo.startswith(SCHEME) else repo
    repo_id = repo_id.strip("/")
    if not _REPO_ID.fullmatch(repo_id):
        raise GenbenchError(f"{repo!r} is not a Hub dataset repo: write ORG/NAME (or hf://ORG/NAME), "
                            "e.g. genbench/digits-mlp")
    return repo_id


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_endpoint() -> str | None:
    """The Hub to talk to: $HF_ENDPOINT read now (huggingface_hub reads it only once, at import)."""
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or None


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE is set: then only the local HF cache is used."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or _env_true("HF_HUB_OFFLINE")


def hub_cache() -> str | None:
    """The standard HF cache, honouring $HF_HUB_CACHE and $HF_HOME as set now (None: the library default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME") else None


def hub_timeout() -> float:
    """Seconds a Hub request may wait for an answer: $HF_HUB_ETAG_TIMEOUT read now (huggingface_hub's default 10)."""
    from huggingface_hub import constants

    try:
        seconds = float(os.environ.get("HF_HUB_ETAG_TIMEOUT", "").strip() or constants.HF_HUB_ETAG_TIMEOUT)
    except ValueError:
        raise GenbenchError(f"HF_HUB_ETAG_TIMEOUT={os.environ['HF_HUB_ETAG_TIMEOUT']!r} is not a number of "
                            "seconds: set it to e.g. 10, or unset it") from None
    return seconds if seconds > 0 else float(constants.DEFAULT_ETAG_TIMEOUT)


def _bound_request(request: Any) -> None:
    """An httpx request hook: a request made without a timeout gets the bound of the genbench call under way."""
    timeout = request.extensions.get("timeout")
    if _BOUND and isinstance(timeout, dict):
        request.extensions["timeout"] = {k: _BOUND[-1] if v is None else v for k, v in timeout.items()}


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Within it, every request of huggingface_hub's shared client that sets no timeout waits at most `seconds`
    (snapshot_download's repo_info and tree listing, and HfApi's pushes, set none: a silent server hung them)."""
    from huggingface_hub.utils import get_session

    client = get_session()
    hooks = client.event_hooks
    if _bound_request not in hooks["request"]:
        hooks["request"].append(_bound_request)
        client.event_hooks = hooks
    _BOUND.append(seconds)
    try:
        yield
    finally:
        _BOUND.pop()


def timed_out(e: BaseException | None) -> bool:
    """Whether an exception is, or was caused by, a request that got no answer in time (httpx's or httpx2's
    TimeoutException, requests' Timeout, or a TimeoutError: whichever client this huggingface_hub uses)."""
    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, TimeoutError) or any(c.__name__ in ("TimeoutException", "Timeout") for c in type(e).__mro__):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def silent_server(seconds: float) -> GenbenchError:
    """The one line for a Hub endpoint that accepts connections but does not answer."""
    where = hub_endpoint() or "the Hugging Face Hub"
    return GenbenchError(f"the server at {where} does not answer (no reply within {seconds:g} s): check the network "
                         "or HF_ENDPOINT (HF_HUB_ETAG_TIMEOUT sets how long genbench waits)")


def _exact(paths: Iterable[str]) -> list[str]:
    """Glob patterns that match exactly these paths (huggingface_hub filters files with fnmatch)."""
    return [glob.escape(p) for p in paths]


def _snapshot(repo_id: str, revision: str, patterns: list[str], *, force: bool = False) -> Path:
    """snapshot_download of some files of a dataset repo into the HF cache; Hub errors become GenbenchErrors."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    where = hub_endpoint() or "the Hugging Face Hub"
    offline = hub_offline()
    seconds = hub_timeout()
    try:
        with bounded(seconds):
            path = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns,
                                     endpoint=hub_endpoint(), cache_dir=hub_cache(), local_files_only=offline,
                                     force_download=force and not offline, etag_timeout=seconds,
                                     library_name="genbench", library_version=__version__)
    except GatedRepoError as e:
        raise GenbenchError(f"dataset repo {repo_id} on {where} is gated: accept its terms on the Hub and log in "
                            f"(`hf auth login`) ({e})") from None
    except RepositoryNotFoundError:
        raise GenbenchError(f"no dataset repo {repo_id} with revision {revision!r} on {where}: check the name and "
                            "the revision, or log in (`hf auth login` or HF_TOKEN) if it is private") from None
    except RevisionNotFoundError:
        raise GenbenchError(f"dataset repo {repo_id} on {where} has no revision {revision!r}; "
                            "pass a branch, tag or commit SHA that exists (default: main)") from None
    except LocalEntryNotFoundError as e:
        if offline:
            raise GenbenchError(f"HF_HUB_OFFLINE is set and {repo_id} (revision {revision}) is not complete in the "
                                f"local HF cache: download it once online (`genbench zoo download {repo_id}`), "
                                "or unset HF_HUB_OFFLINE") from None
        if timed_out(e):
            raise silent_server(seconds) from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GenbenchError(f"could not reach {where} to download {repo_id} ({first}) and it is not in the local HF "
                            "cache: check the network (HF_ENDPOINT names the server), or run this where the Hub "
                            "can be reached and set HF_HUB_OFFLINE=1 here to use the downloaded copy") from None
    except Exception as e:  # network and server failures: one readable line, not a traceback
        if timed_out(e):
            raise silent_server(seconds) from None
        raise GenbenchError(f"could not download {repo_id} (revision {revision}) from {where}: "
                            f"{type(e).__name__}: {e}") from e
    return Path(path)


def download_zoo(repo: str, revision: str | None = None, models: str | Iterable[str] | None = None, *,
                 force: bool = False) -> Zoo:
    """Download a zoo (or only the `models` matching ids / glob patterns) from a Hub dataset repo into the
    HF cache, check every file against its sha256, and open it; `zoo.revision` is the commit loaded. Only the files
    the zoo cites are fetched (its table's checkpoints, the data zoo.json lists), whatever else the repo holds."""
    repo_id = parse_repo(repo)
    root = _snapshot(repo_id, revision or DEFAULT_REVISION, [MANIFEST, TABLE, CARD], force=force)
    commit = root.name  # the cache names each snapshot folder by its commit SHA
    if not (root / MANIFEST).is_file():
        raise GenbenchError(f"dataset repo {repo_id} (revision {commit}) is not a genbench zoo: it has no {MANIFEST}")
    if not (root / TABLE).is_file():
        raise GenbenchError(f"dataset repo {repo_id} (revision {commit}) has a {MANIFEST} but no {TABLE}: the zoo was "
                            "pushed incompletely; its publisher can push it again with `genbench zoo push`")
    Zoo(root, revision=commit, repo_id=repo_id)  # manifest and table checked (the table against its sha256)
    full = Zoo(root)  # every model of the table, downloaded or not
    wanted = full.select_models(models)
    files = [p for mid in wanted for p in (full.row(mid)["checkpoint"], full.row(mid)["init_checkpoint"])]
    files += [DATASET] if DATASET in full.manifest["files"] else []
    _snapshot(repo_id, commit, _exact(files), force=force)  # exactly the zoo's files: never a stray one of the repo
    zoo = Zoo(root, revision=commit, repo_id=repo_id)
    absent = sorted(set(wanted) - set(zoo.model_ids))
    if absent:
        raise GenbenchError(f"dataset repo {repo_id} (revision {commit}) lacks the checkpoints of {len(absent)} "
                            f"model(s) listed in its table: {', '.join(absent[:5])}; the zoo was pushed incompletely")
    problems = zoo.verify()
    if problems:
        raise GenbenchError(f"{len(problems)} file(s) of {repo_id} (revision {commit}) do not match zoo.json; "
                            "nothing was deleted:\n" + "\n".join(problems))
    return zoo


@dataclass
class Pushed:
    """What a push sent: the repo, its commit (None for upload_large_folder) and the files."""

    repo_id: str
    commit: str | None
    files: list[str]
    tag: str | None = None  # table-<hash> for a zoo (see table_tag)

    @property
    def url(self) -> str:
        """The dataset repo's page."""
        return f"{hub_endpoint() or 'https://huggingface.co'}/datasets/{self.repo_id}"


def hub_api() -> Any:
    """A Hub client for the configured endpoint."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_endpoint(), library_name="genbench", library_version=__version__)


def canonical_repo(zoo_name: str) -> str:
    """The Hub dataset repo holding the canonical copy of a zoo: the one shipped records are verified against."""
    return f"{HUB_ORG}/{zoo_name}"


def table_tag(table_sha256: str) -> str:
    """The tag `push_zoo` puts on the commit holding a zoo with this table hash, so that the zoo a record cites can
    be downloaded by its hash (`genbench zoo download ORG/NAME --revision table-...`)."""
    return f"table-{table_sha256[:16]}"


def upload_files(folder: Path, repo_id: str, files: list[str], *, private: bool, message: str, api: Any = None,
                 replace: str = "*") -> Pushed:
    """Create the dataset repo (if needed) and upload `files` of `folder`; the repo's files matching `replace` that
    are not among them (an earlier push's) are deleted, so a repo never mixes two zoos (or two sets of records). A
    zoo replaces every file ('*', .gitattributes kept); records replace '*.json', keeping a card written on the Hub."""
    refuse_private(folder)  # a private training is never published (issue 43)
    api = api if api is not None else hub_api()
    size = sum((folder / f).stat().st_size for f in files)
    large = (len(files) > LARGE_UPLOAD_FILES or size > LARGE_UPLOAD_BYTES) and hasattr(api, "upload_large_folder")
    seconds = PUSH_TIMEOUT_FACTOR * hub_timeout()
    try:
        with bounded(seconds):
            commit = _upload(api, folder, repo_id, files, private=private, message=message, large=large,
                             replace=replace)
    except Exception as e:  # authentication, permissions, network: one readable line
        if timed_out(e):
            raise silent_server(seconds) from None
        raise GenbenchError(f"could not push {folder} to dataset repo {repo_id} on "
                            f"{hub_endpoint() or 'the Hugging Face Hub'}: {type(e).__name__}: {e}. "
                            "Log in with `hf auth login` (or set HF_TOKEN) with write access to the repo") from e
    return Pushed(repo_id, commit, files)


def _upload(api: Any, folder: Path, repo_id: str, files: list[str], *, private: bool, message: str,
            large: bool, replace: str) -> str | None:
    """create_repo, then upload_folder (or upload_large_folder: no commit known) of exactly `files`."""
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    if large:
        api.upload_large_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset",
                                allow_patterns=_exact(files), private=private)
        _delete_stale(api, repo_id, files, message, replace)
        return None
    info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset",
                             allow_patterns=_exact(files), delete_patterns=[replace], commit_message=message)
    return getattr(info, "oid", None)


def _delete_stale(api: Any, repo_id: str, files: list[str], message: str, replace: str = "*") -> None:
    """Delete the repo's files matching `replace` that an earlier push left and are not among `files`
    (.gitattributes kept)."""
    import fnmatch
    keep = set(files) | {".gitattributes"}
    stale = sorted(f for f in set(api.list_repo_files(repo_id, repo_type="dataset")) - keep
                   if fnmatch.fnmatch(f, replace))
    if stale:
        api.delete_files(repo_id, delete_patterns=_exact(stale), repo_type="dataset",
                         commit_message=f"{message} (files of an earlier push removed)")


def card_has_table_config(text: str) -> bool:
    """Whether a dataset card's YAML front matter makes models.parquet the default config."""
    m = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", text, flags=re.S)
    try:
        front = yaml.safe_load(m.group(1)) if m else None
    except yaml.YAMLError:
        return False
    configs = front.get("configs") if isinstance(front, dict) else None
    for c in configs if isinstance(configs, list) else []:
        if isinstance(c, dict) and c.get("config_name") == "default":
            files = c.get("data_files")
            files = [files] if isinstance(files, (str, dict)) else files or []
            paths = [f.get("path") if isinstance(f, dict) else f for f in files]
            return paths == [TABLE] or paths == [[TABLE]]
    return False


def push_zoo(zoo: str | Path, repo: str, *, private: bool = False, api: Any = None) -> Pushed:
    """Publish a local zoo folder as a Hub dataset repo (zoo.json, models.parquet, card, data, checkpoints).

    The zoo is verified first; a missing dataset card is written, one without the models.parquet
    config is refused (so the table always opens with `datasets.load_dataset`)."""
    if str(zoo).startswith(SCHEME):
        raise GenbenchError(f"{zoo} is already on the Hub; push a local zoo folder (or a locally built zoo's name)")
    z = load_zoo(zoo)
    refuse_private(z.root, z.manifest)  # before its card is written
    repo_id = parse_repo(repo)
    problems = z.verify()
    if problems:
        raise GenbenchError(f"zoo {z.name!r} at {z.root} fails verification, so it is not pushed:\n" + "\n".join(problems))
    card = z.root / CARD
    text = card.read_text() if card.is_file() else None
    if text is None or text == dataset_card(z):  # none, or genbench's own card: say where the zoo now lives
        write_text_atomic(card, dataset_card(z, repo_id))
    elif not card_has_table_config(text):
        raise GenbenchError(f"{card} has no YAML front matter making {TABLE} the default config, so the table "
                            "would not open with datasets.load_dataset; delete it (genbench writes the standard "
                            f"card) or start it with:\n---\nconfigs:\n- config_name: default\n  data_files: {TABLE}\n---")
    files = zoo_files(z)
    api = api if api is not None else hub_api()
    pushed = upload_files(z.root, repo_id, files, private=private, api=api,
                          message=f"genbench {__version__}: zoo {z.name} v{z.version}, {len(z)} models")
    tag = table_tag(z.table_sha256)
    seconds = PUSH_TIMEOUT_FACTOR * hub_timeout()
    try:  # the zoo's content hash names its commit: records cite the hash, verify downloads by it
        with bounded(seconds):
            api.create_tag(repo_id, tag=tag, revision=pushed.commit or DEFAULT_REVISION, repo_type="dataset",
                           exist_ok=True)
    except Exception as e:
        if timed_out(e):
            raise silent_server(seconds) from None
        raise GenbenchError(f"pushed {z.name} to {repo_id} but could not tag it {tag}: {type(e).__name__}: {e}; "
                            "push again (the upload is kept)") from e
    pushed.tag = tag
    return pushed


def zoo_files(zoo: Zoo) -> list[str]:
    """Exactly the zoo's files, relative to its folder: zoo.json, its table and card where present, and every file it
    records a sha256 of (the data zoo.json lists, the table's checkpoints); never a stray file of the folder."""
    own = [f for f in (MANIFEST, TABLE, CARD) if (zoo.root / f).is_file()]
    return list(dict.fromkeys(own + list(zoo.expected_files())))


def copy_zoo_files(zoo: Zoo, dest: Path) -> None:
    """Copy exactly the zoo's files (zoo_files) into `dest`."""
    import shutil

    for rel in zoo_files(zoo):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(zoo.root / rel, dest / rel)  # follows the HF cache's links


def cited_table_hashes(name: str, results: str | Path | None = None) -> set[str]:
    """The table hashes the shipped records of zoo `name` cite (leaderboard/results/NAME/*.json, their zoo block);
    `results` is that folder of records (default: the checkout's, none for an installed package)."""
    import json

    from ..paths import shipped_results_dir
    folder = Path(results) if results is not None else shipped_results_dir()
    hashes: set[str] = set()
    for path in sorted((folder / name).glob("*.json")) if folder is not None else ():
        try:
            block = json.loads(path.read_text()).get("zoo") or {}
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable record cites nothing; verify reports it
        sha = block.get("table_sha256") if isinstance(block, dict) else None
        if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha):
            hashes.add(sha)
    return hashes


def is_shipped(name: str) -> bool:
    """Whether `zoo get` gets the zoo `name`: a recipe's grid, or a training of an official grid that is shipped."""
    from .roles import recipe_of
    found = recipe_of(name)
    if found is None:
        return False
    grid, _ = found
    return name in (official_trainings(grid) if grid in OFFICIAL_ZOOS else [grid])


def get_zoo(name: str, *, results: str | Path | None = None, progress: bool = True,
            note: Callable[[str], None] | None = None) -> tuple[Zoo, str]:
    """The official copy of one of genbench's zoos in $GENBENCH_HOME/zoos/NAME: downloaded from its canonical Hub
    repo (HUB_ORG/NAME, at the tag of the hash the shipped records cite) when reachable, else built (`note` is told
    why, and how long building takes); a zoo whose table hash differs from the one the records cite is refused, and
    so is a training RECIPE-tK that genbench does not ship, a folder NAME that is no zoo and a partial build of
    NAME (neither is overwritten). Returns (zoo, 'present'|'downloaded'|'built')."""
    from ..paths import zoos_dir
    from .build import build_zoo
    from .roles import build_command_of, build_time, recipe_of

    found = recipe_of(name)
    if found is None:
        raise GenbenchError(f"{name!r} is not one of genbench's zoos (a recipe or RECIPE-tK); `genbench zoo list` "
                            "shows them")
    grid, k = found
    if not is_shipped(name):  # a training genbench does not ship: refused before anything is fetched or built
        which = (f"shipped: {', '.join(t[len(grid):] for t in official_trainings(grid)[1:])}"
                 if grid in OFFICIAL_ZOOS else
                 f"trainings are shipped for the official grids only: {', '.join(OFFICIAL_ZOOS)}")
        raise GenbenchError(f"no shipped training {k} of {grid} ({which}); build it with `{build_command_of(name)}`")
    cited = cited_table_hashes(name, results)

    def checked(zoo: Zoo, how: str) -> tuple[Zoo, str]:
        if cited and zoo.table_sha256 not in cited:
            raise GenbenchError(f"the zoo {name} {how} has table sha256 {zoo.table_sha256[:12]}..., but the shipped "
                                f"records cite {', '.join(sorted(h[:12] + '...' for h in cited))}: refused (it is "
                                "not the zoo they were made on)")
        return zoo, how

    dest = zoos_dir() / name
    if dest.is_file() or dest.is_dir() and any(dest.iterdir()):  # an empty folder is simply filled
        return checked(present_zoo(name, dest), "present")
    repo_id = canonical_repo(name)
    zoo, why = None, ""
    for revision in [table_tag(h) for h in sorted(cited)] + [None]:
        try:
            zoo = download_zoo(repo_id, revision=revision)
            break
        except GenbenchError as e:
            if "do not match zoo.json" in str(e):
                raise  # a damaged copy on the Hub is reported, not silently rebuilt
            why = why or str(e)
        except Exception as e:  # noqa: BLE001  unreachable Hub, no such repo or tag: build it instead
            why = why or f"{type(e).__name__}: {e}"
            continue
    if zoo is None:
        if note is not None:
            note(f"no download of {repo_id} ({why}): {name} is built here instead (it takes {build_time(name)})")
        return checked(build_zoo(grid, training=k, progress=progress), "built")
    checked(zoo, f"downloaded from {repo_id} (commit {zoo.revision})")
    install_copy(zoo, dest)
    return Zoo(dest), "downloaded"


def present_zoo(name: str, dest: Path) -> Zoo:
    """The zoo already in $GENBENCH_HOME/zoos/NAME, refused when the folder is no zoo or a partial build."""
    from .storage import build_command

    if not (dest / MANIFEST).is_file():
        raise GenbenchError(f"{dest} exists and is not a zoo (it has no {MANIFEST}): move it away (or delete it) "
                            f"and run `genbench zoo get {name}` again")
    zoo = Zoo(dest)
    if not zoo.complete:
        raise GenbenchError(f"{dest} holds a partial build of {name} ({len(zoo)} of {zoo.expected_models} models): "
                            f"finish it with `{build_command(name, dest)}`, or move the folder away and run "
                            f"`genbench zoo get {name}` again to download the official copy")
    return zoo


def install_copy(zoo: Zoo, dest: Path) -> None:
    """Copy a downloaded zoo to `dest` through a temporary folder that never outlives the call."""
    import shutil

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.get"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        copy_zoo_files(zoo, tmp)  # the HF cache's links resolved: an ordinary zoo folder
        os.replace(tmp, dest)
    except OSError as e:
        raise GenbenchError(f"could not put the downloaded zoo {zoo.name} into {dest} ({type(e).__name__}: "
                            f"{e.strerror or e}): move {dest} away if it exists, and run `genbench zoo get "
                            f"{dest.name}` again") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
