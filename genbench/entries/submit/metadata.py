"""A submission folder's metadata: submission.yaml read and checked field by field into a `Submission`. Nothing of
the folder is trusted: the folder must be a real folder (not a link), its files are read as regular files (never
through a link) with a size cap, the YAML is parsed without anchors or aliases (so it cannot expand), every field has
a length limit, and an error quotes a field only as a short, escaped excerpt."""
from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...defaults import CHECK_ZOO, DEFAULT_ZOO, OFFICIAL_ZOOS
from ...errors import GenbenchError, did_you_mean
from ...fileio import read_capped
from ...paths import PACKAGE
from ...text import excerpt, plain_text

SUBMISSIONS = "submissions"  # the checkout's folder of submissions
SUBMISSION_FILE = "submission.yaml"
MEASURE_FILE = "measure.py"
REQUIRED = ("title", "authors", "contact", "paper_url", "licence", "entry")
OPTIONAL = ("zoos",)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URL = re.compile(r"^https?://[^\s/$.?#][^\s]*$", re.IGNORECASE)
_SPDX = re.compile(r"^\(?[A-Za-z0-9.+-]+\)?( (AND|OR|WITH) \(?[A-Za-z0-9.+-]+\)?)*$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*\Z")
_MEASURE = re.compile(r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")
SUBMISSION_MAX_BYTES = 16 * 1024   # submission.yaml: a few fields (pure-Python YAML: ~1 s for 16 KiB at worst)
MEASURE_MAX_BYTES = 1024 * 1024    # measure.py: the parent reads it only to hash it
MAX_LENGTH = {"title": 300, "author": 200, "contact": 254, "paper_url": 2000, "licence": 200, "entry": 100, "zoo": 100}
MAX_AUTHORS, MAX_ZOOS = 100, 20
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


@dataclass(frozen=True)
class Submission:
    """A checked submission folder: its name (the folder's), its metadata, and where its code lives."""

    name: str
    folder: Path
    title: str
    authors: tuple[str, ...]
    contact: str
    paper_url: str | None
    licence: str
    entry: str
    zoos: tuple[str, ...] = ()  # those submission.yaml names; () when it names none (choose_zoos picks them)

    @property
    def measure_file(self) -> Path:
        """The submission's measure.py."""
        return self.folder / MEASURE_FILE

    @property
    def source_sha256(self) -> str:
        """sha256 of measure.py's text with universal newlines (what the registry hashes for a measure defined in
        it), read as a regular file of at most MEASURE_MAX_BYTES, never through a link."""
        data = read_capped(self.measure_file, MEASURE_MAX_BYTES, what="the submission's")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise GenbenchError(f"{self.measure_file} is not UTF-8 text ({e.reason} at byte {e.start})") from None
        return hashlib.sha256(text.replace("\r\n", "\n").replace("\r", "\n").encode()).hexdigest()

    def fields(self) -> dict[str, Any]:
        """The metadata stored in each result record. `path` says where the submission was run from: for a folder
        of the checkout's submissions/ the same text wherever genbench runs (`submissions/NAME`), else the folder's
        absolute path. It is information only: `genbench verify` never runs code from a path a record names."""
        folder = self.folder.resolve()
        trusted = trusted_submissions_dir()
        path = (f"{SUBMISSIONS}/{folder.name}" if trusted is not None and folder.parent == trusted.resolve()
                else folder.as_posix())
        return {"title": self.title, "authors": list(self.authors), "contact": self.contact,
                "paper_url": self.paper_url, "licence": self.licence, "entry": self.entry,
                "zoos": list(self.zoos), "path": path}


def trusted_submissions_dir() -> Path | None:
    """The checkout's submissions/ folder (beside leaderboard/), when genbench runs from a checkout of its
    repository: where `genbench verify` finds a record's submission by its entry name; None for an installed
    package."""
    root = PACKAGE.parent
    folder = root / SUBMISSIONS
    return folder if folder.is_dir() and (root / "pyproject.toml").is_file() else None


def spdx_problem(licence: str) -> str | None:
    """Why `licence` is not an SPDX licence expression as the SPDX list spells it (packaging's copy of the list),
    or None when it is."""
    from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
    try:
        canonical = canonicalize_license_expression(licence)
    except InvalidLicenseExpression as e:
        return str(e).rstrip(".")
    return None if canonical == licence else f"the list spells it {canonical!r}"


def is_entry_name(name: Any) -> bool:
    """Whether `name` can be a submission's (and so an entry's) name: a plain folder name, no path."""
    return isinstance(name, str) and len(name) <= 100 and _NAME.match(name) is not None


def _fail(file: Path, key: str, expected: str, found: Any) -> GenbenchError:
    """The error for one bad field: the file, the field, what was expected and (a short, escaped excerpt of) what
    was found."""
    return GenbenchError(f"{file}: field {key!r}: expected {expected}, found {excerpt(found)}")


def _text(file: Path, key: str, value: Any, expected: str, limit: int) -> str:
    """`value` stripped, when it is a non-empty string of one line, without control or bidirectional characters, of
    at most `limit` characters; else the field's error."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(file, key, expected, value)
    value = value.strip()
    if len(value) > limit:
        raise _fail(file, key, f"{expected} of at most {limit} characters (it has {len(value)})", value)
    if (bad := _CONTROL.search(value)) is not None:
        raise _fail(file, key, f"{expected} on one line, without control or bidirectional characters (it has "
                               f"{excerpt(bad.group())} at character {bad.start() + 1})", value)
    return value


class _NoAliasLoader(yaml.SafeLoader):
    """yaml's SafeLoader without anchors and aliases (`&a`, `*a`): a few bytes of aliases can expand to gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (& and *) are not allowed",
                                              event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A mapping, refusing a key given twice (yaml keeps the last one silently, so a field could hide)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key: the mapping's own construction refuses it
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_metadata(text: str) -> Any:
    """submission.yaml's text parsed as plain YAML data: no anchors or aliases (so the data is no larger than the
    text, which the reader caps), no tags beyond the safe ones; nesting deeper than Python's recursion limit raises
    RecursionError (load_submission refuses it)."""
    return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506  (a SafeLoader)


def open_folder(folder: Path) -> int:
    """An open descriptor of a submission folder that is a real folder, not a symbolic link (or a GenbenchError)."""
    try:
        st = os.lstat(folder)
    except OSError:
        raise GenbenchError(f"submission folder {folder} does not exist; copy submissions/_template to start "
                            "one") from None
    if stat.S_ISLNK(st.st_mode):
        raise GenbenchError(f"submission folder {folder} is a symbolic link; genbench runs a submission only from "
                            "a real folder (copy it there instead of linking)")
    if not stat.S_ISDIR(st.st_mode):
        raise GenbenchError(f"{folder} is a file; pass the submission's folder")
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(folder, flags)
    except OSError as e:
        raise GenbenchError(f"cannot open submission folder {folder}: {e.strerror or e}") from None


def load_submission(path: str | Path) -> Submission:
    """Read and check `submissions/NAME/submission.yaml` (or the folder holding it); every problem is a
    GenbenchError naming the file, the field, what was expected and what was found. The folder must be a real
    folder (not a link), and submission.yaml and measure.py regular files (not links) within their size caps."""
    p = Path(path)
    folder = p.parent if p.name == SUBMISSION_FILE else p
    file = folder / SUBMISSION_FILE
    if p.name != SUBMISSION_FILE and p.is_file() and not p.is_symlink():
        raise GenbenchError(f"{p} is a file; pass the submission's folder ({p.parent})")
    fd = open_folder(folder)
    try:
        name = Path(os.path.abspath(folder)).name
        if not _NAME.match(name) or len(name) > 100:
            raise GenbenchError(f"submission folder name {excerpt(name)} must use only letters, digits, '_' and '-' "
                                "(at most 100; it names the submission's records)")
        for wanted, hint in ((SUBMISSION_FILE, f"copy submissions/_template/{SUBMISSION_FILE} and fill it in"),
                             (MEASURE_FILE, "it must define and register the measure(s) (see "
                                            "submissions/_template/measure.py)")):
            try:
                st = os.stat(wanted, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise GenbenchError(f"{folder} has no {wanted}; {hint}") from None
            if stat.S_ISLNK(st.st_mode):
                raise GenbenchError(f"{folder / wanted} is a symbolic link; genbench reads no file of a submission "
                                    "through a link: put the file itself there")
        raw = read_capped(SUBMISSION_FILE, SUBMISSION_MAX_BYTES, what="the submission's", dir_fd=fd, shown=file)
        if not stat.S_ISREG(os.stat(MEASURE_FILE, dir_fd=fd, follow_symlinks=False).st_mode):
            raise GenbenchError(f"{folder / MEASURE_FILE} is not a regular file")
    finally:
        os.close(fd)
    try:
        data = parse_metadata(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise GenbenchError(f"{file}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(e, "problem", None) or "cannot be parsed"
        raise GenbenchError(f"{file}: not valid YAML{at}: {plain_text(problem, limit=120)}") from None
    except RecursionError:
        raise GenbenchError(f"{file}: not valid YAML: nested too deeply") from None
    if data is None:
        raise GenbenchError(f"{file} is empty; copy submissions/_template/{SUBMISSION_FILE} and fill in "
                            f"{', '.join(REQUIRED)}")
    if not isinstance(data, dict):
        raise GenbenchError(f"{file}: expected a mapping of fields ({', '.join(REQUIRED)}), "
                            f"found {type(data).__name__} {excerpt(data)}")
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            err = did_you_mean(str(key)[:40], REQUIRED + OPTIONAL, what=f"field in {file}:")
            raise GenbenchError(f"{err} The fields are {', '.join(REQUIRED + OPTIONAL)}.")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise GenbenchError(f"{file}: missing field(s) {', '.join(repr(k) for k in missing)}; "
                            f"a submission needs {', '.join(REQUIRED)} (paper_url may be null)")

    title = _text(file, "title", data["title"], "a non-empty string", MAX_LENGTH["title"])
    authors = data["authors"]
    if (not isinstance(authors, list) or not authors or len(authors) > MAX_AUTHORS
            or not all(isinstance(a, str) and a.strip() for a in authors)):
        raise _fail(file, "authors", f"a non-empty list of names (strings, at most {MAX_AUTHORS}), e.g. "
                                     "[\"Ada Lovelace\"]", authors)
    authors = [_text(file, "authors", a, "a name", MAX_LENGTH["author"]) for a in authors]
    contact = _text(file, "contact", data["contact"], "an e-mail address", MAX_LENGTH["contact"])
    if not _EMAIL.match(contact):
        raise _fail(file, "contact", "an e-mail address such as name@example.org", contact)
    paper_url = data["paper_url"]
    if paper_url is not None:
        if not isinstance(paper_url, str) or not _URL.match(paper_url.strip()):
            raise _fail(file, "paper_url", "an http(s) URL, or null when there is no paper", paper_url)
        paper_url = _text(file, "paper_url", paper_url, "an http(s) URL", MAX_LENGTH["paper_url"])
    licence = _text(file, "licence", data["licence"], "an SPDX licence identifier such as MIT or Apache-2.0",
                    MAX_LENGTH["licence"])
    if not _SPDX.match(licence):
        raise _fail(file, "licence", "an SPDX licence identifier such as MIT or Apache-2.0", licence)
    spdx = spdx_problem(licence)
    if spdx:
        raise _fail(file, "licence", f"an identifier on the SPDX licence list ({spdx})", licence)
    entry = _text(file, "entry", data["entry"], "the name of a measure that measure.py registers",
                  MAX_LENGTH["entry"])
    if not _MEASURE.match(entry):
        raise _fail(file, "entry", "a measure name of the form 'family.variant' registered by measure.py", entry)
    zoos = data.get("zoos", [])
    if "zoos" in data and (not isinstance(zoos, list) or not zoos or len(zoos) > MAX_ZOOS
            or not all(isinstance(z, str) and z.strip() for z in zoos)):
        raise _fail(file, "zoos", f"a non-empty list of zoo names (at most {MAX_ZOOS}; or leave the field out "
                                  "to score on the official zoos built here)", zoos)
    for z in zoos:
        if not is_known_zoo(z.strip()):
            raise _fail(file, "zoos", "names of genbench's zoos, never a path or a Hub repository (a submission is "
                                      f"scored only on known zoos: {', '.join(known_zoos())}, another recipe of "
                                      "`genbench zoo list` or a training RECIPE-tK; your own zoo: name it with "
                                      "`genbench submit --zoo`)", z)
    return Submission(name=name, folder=folder, title=title, authors=tuple(authors), contact=contact,
                      paper_url=paper_url, licence=licence, entry=entry,
                      zoos=tuple(dict.fromkeys(z.strip() for z in zoos)))


def known_zoos() -> tuple[str, ...]:
    """The zoos a submission usually names: the official ones, the demo's and the test zoo."""
    return tuple(dict.fromkeys((*OFFICIAL_ZOOS, DEFAULT_ZOO, CHECK_ZOO)))


def is_known_zoo(name: str) -> bool:
    """Whether `name` is one of genbench's zoos (a recipe's, or training K of one: RECIPE-tK), which a submission.yaml
    may name; it is opened only by its name among the zoos built here (`genbench zoo get NAME` gets it)."""
    from ...zoo.roles import recipe_of
    return is_entry_name(name) and recipe_of(name) is not None
