"""A submission folder's metadata: submission.yaml read and checked field by field into a `Submission`."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...defaults import DEFAULT_ZOO
from ...errors import GenbenchError, did_you_mean
from ...paths import PACKAGE

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
    zoos: tuple[str, ...] = field(default=(DEFAULT_ZOO,))

    @property
    def measure_file(self) -> Path:
        """The submission's measure.py."""
        return self.folder / MEASURE_FILE

    @property
    def source_sha256(self) -> str:
        """sha256 of measure.py's text (what the registry hashes for a measure defined in it)."""
        return hashlib.sha256(self.measure_file.read_text(encoding="utf-8").encode()).hexdigest()

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
    """The error for one bad field: the file, the field, what was expected and what was found."""
    return GenbenchError(f"{file}: field {key!r}: expected {expected}, found {found!r}")


def _nonempty_str(file: Path, key: str, value: Any, expected: str) -> str:
    """`value` stripped, when it is a non-empty string; else the field's error."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(file, key, expected, value)
    return value.strip()


def load_submission(path: str | Path) -> Submission:
    """Read and check `submissions/NAME/submission.yaml` (or the folder holding it); every problem is a
    GenbenchError naming the file, the field, what was expected and what was found."""
    p = Path(path)
    folder = p.parent if p.name == SUBMISSION_FILE else p
    file = folder / SUBMISSION_FILE
    if p.is_file() and p.name != SUBMISSION_FILE:
        raise GenbenchError(f"{p} is a file; pass the submission's folder ({p.parent})")
    if not folder.is_dir():
        raise GenbenchError(f"submission folder {folder} does not exist; copy submissions/_template to start one")
    if not _NAME.match(folder.resolve().name):
        raise GenbenchError(f"submission folder name {folder.resolve().name!r} must use only letters, digits, '_' "
                            "and '-' (it becomes the entry's name on the leaderboard)")
    if not file.is_file():
        raise GenbenchError(f"{folder} has no {SUBMISSION_FILE}; copy submissions/_template/{SUBMISSION_FILE} "
                            "and fill it in")
    if not (folder / MEASURE_FILE).is_file():
        raise GenbenchError(f"{folder} has no {MEASURE_FILE}; it must define and register the measure(s) "
                            "(see submissions/_template/measure.py)")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise GenbenchError(f"{file}: not valid YAML{at}: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GenbenchError(f"{file}: cannot be read: {e}") from None
    if data is None:
        raise GenbenchError(f"{file} is empty; copy submissions/_template/{SUBMISSION_FILE} and fill in "
                            f"{', '.join(REQUIRED)}")
    if not isinstance(data, dict):
        raise GenbenchError(f"{file}: expected a mapping of fields ({', '.join(REQUIRED)}), "
                            f"found {type(data).__name__} {data!r}")
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            err = did_you_mean(str(key), REQUIRED + OPTIONAL, what=f"field in {file}:")
            raise GenbenchError(f"{err} The fields are {', '.join(REQUIRED + OPTIONAL)}.")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise GenbenchError(f"{file}: missing field(s) {', '.join(repr(k) for k in missing)}; "
                            f"a submission needs {', '.join(REQUIRED)} (paper_url may be null)")

    title = _nonempty_str(file, "title", data["title"], "a non-empty string")
    authors = data["authors"]
    if (not isinstance(authors, list) or not authors
            or not all(isinstance(a, str) and a.strip() for a in authors)):
        raise _fail(file, "authors", "a non-empty list of names (strings), e.g. [\"Ada Lovelace\"]", authors)
    contact = _nonempty_str(file, "contact", data["contact"], "an e-mail address")
    if not _EMAIL.match(contact):
        raise _fail(file, "contact", "an e-mail address such as name@example.org", contact)
    paper_url = data["paper_url"]
    if paper_url is not None and (not isinstance(paper_url, str) or not _URL.match(paper_url.strip())):
        raise _fail(file, "paper_url", "an http(s) URL, or null when there is no paper", paper_url)
    licence = _nonempty_str(file, "licence", data["licence"], "an SPDX licence identifier such as MIT or Apache-2.0")
    if not _SPDX.match(licence):
        raise _fail(file, "licence", "an SPDX licence identifier such as MIT or Apache-2.0", licence)
    spdx = spdx_problem(licence)
    if spdx:
        raise _fail(file, "licence", f"an identifier on the SPDX licence list ({spdx})", licence)
    entry = _nonempty_str(file, "entry", data["entry"], "the name of a measure that measure.py registers")
    if not _MEASURE.match(entry):
        raise _fail(file, "entry", "a measure name of the form 'family.variant' registered by measure.py", entry)
    zoos = data.get("zoos", [DEFAULT_ZOO])
    if (not isinstance(zoos, list) or not zoos
            or not all(isinstance(z, str) and z.strip() for z in zoos)):
        raise _fail(file, "zoos", "a non-empty list of zoo names (or leave the field out for "
                                  f"{[DEFAULT_ZOO]})", zoos)
    return Submission(name=folder.resolve().name, folder=folder, title=title,
                      authors=tuple(a.strip() for a in authors), contact=contact,
                      paper_url=None if paper_url is None else paper_url.strip(), licence=licence, entry=entry,
                      zoos=tuple(dict.fromkeys(z.strip() for z in zoos)))
