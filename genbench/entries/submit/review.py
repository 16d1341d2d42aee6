"""The review of a submission's source at `genbench leaderboard add`: the obvious ways a measure could generate or look
up the task's data, or its answers, instead of measuring the model it is given (the sandbox hides the generators
that ship with genbench's environment; code that brings its own is visible here). Each finding names the file, the
line and what was found; a maintainer who read the code can accept it (`--reviewed`)."""
from __future__ import annotations

import ast
from pathlib import Path

# modules that generate or load a task's data (or a zoo): importing one is a finding
DATA_MODULES = ("mnist1d", "sklearn.datasets", "genbench.zoo", "genbench.harness", "genbench.entries",
                "torchvision.datasets", "datasets", "tensorflow_datasets", "keras.datasets",
                "tensorflow.keras.datasets", "huggingface_hub", "openml")
# functions that build or fetch a dataset or a zoo, by their name (called as an attribute or a bare name)
DATA_CALLS = ("load_dataset", "load_zoo", "open_zoo_ref", "load_pool", "train_subset", "make_dataset",
              "get_dataset", "get_dataset_args", "load_digits", "fetch_openml", "snapshot_download",
              "hf_hub_download")
# functions that read files or list folders: a measure gets its model and data from ctx only
FILE_CALLS = ("open", "read_bytes", "read_text", "listdir", "scandir", "walk", "iterdir", "glob", "rglob", "load",
              "loadtxt", "genfromtxt", "fromfile", "read_csv", "read_parquet", "read_json", "read_pickle",
              "load_file", "safe_open", "memmap")
# functions that run code built at run time (a table or a generator hidden from this review)
OPAQUE_CALLS = ("exec", "eval", "compile", "__import__", "import_module", "b64decode", "b85decode", "a85decode",
                "decompress", "loads")
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".md", ".txt", ".cfg", ".toml")
MAX_NUMBERS = 64  # numbers in one literal (a list, tuple, set or dict) at most
MAX_KEYS = 16  # entries of a dict literal whose values are numbers at most (a table keyed by model)
MAX_STRING = 2000  # characters of one string or bytes literal outside a docstring at most


def _module_hit(name: str) -> str | None:
    for m in DATA_MODULES:
        if name == m or name.startswith(m + "."):
            return m
    return None


def _numbers(node: ast.AST) -> int:
    """How many number constants a literal holds (nested literals included)."""
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, complex))
               and not isinstance(n.value, bool))


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def review_source(text: str, name: str = "measure.py") -> list[str]:
    """The findings in one Python file's source, each 'NAME line N: what'."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [f"{name} line {e.lineno}: does not parse ({e.msg})"]
    found: list[str] = []
    docs = _docstrings(tree)
    inside: set[int] = set()  # literals already counted as part of a larger one

    def say(node: ast.AST, what: str) -> None:
        found.append(f"{name} line {getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (m := _module_hit(alias.name)) is not None:
                    say(node, f"imports {alias.name} ({m}: it generates or loads a task's data)")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            full = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            hits = [f for f in full if _module_hit(f)]
            if hits:
                say(node, f"imports from {hits[-1]} ({_module_hit(hits[-1])}: it generates or loads a task's data)")
        elif isinstance(node, ast.Call):
            fn = _call_name(node)
            if fn in DATA_CALLS:
                say(node, f"calls {fn}(), which builds or fetches a dataset or a zoo")
            elif fn in FILE_CALLS:
                say(node, f"calls {fn}(), which reads a file or a folder: a measure gets its model and data from ctx "
                          "only")
            elif fn in OPAQUE_CALLS:
                say(node, f"calls {fn}(), which runs or decodes something built at run time (what it holds is not "
                          "readable here)")
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) and id(node) not in inside:
            for sub in ast.walk(node):
                if sub is not node:
                    inside.add(id(sub))
            n = _numbers(node)
            if n > MAX_NUMBERS:
                say(node, f"holds a literal of {n} numbers (a table of data or of answers?)")
            elif isinstance(node, ast.Dict) and sum(
                    1 for v in node.values if v is not None and _numbers(v) > 0) > MAX_KEYS:
                say(node, f"holds a table of {len(node.keys)} numbers by key (values looked up by model?)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docs:
            if len(node.value) > MAX_STRING:
                kind = type(node.value).__name__
                say(node, f"holds a {kind} literal of {len(node.value)} characters (encoded data?)")
            elif isinstance(node.value, str) and _module_hit(node.value.strip()):
                say(node, f"names the module {node.value.strip()!r} in a string (an import hidden from this review?)")
    return found


def review_submission(folder: str | Path) -> list[str]:
    """The findings in a submission folder: each Python file reviewed (review_source), and every file that is not
    source or text (a submission carries code, not data). Links are not followed."""
    folder = Path(folder)
    found: list[str] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if "__pycache__" in path.parts or path.is_dir() and not path.is_symlink():
            continue
        if path.is_symlink():
            found.append(f"{rel}: a link (a submission folder holds its own files only)")
        elif path.suffix == ".py":
            found += review_source(path.read_text(errors="replace"), rel)
        elif path.suffix not in CODE_SUFFIXES and path.name not in ("LICENSE", "LICENCE", "COPYING"):
            found.append(f"{rel}: a file that is not source or text ({path.stat().st_size} bytes: data?)")
    return found


def review_problems(name: str, submissions: str | Path | None = None) -> list[str]:
    """Why the submission `name` (a folder of the trusted `submissions` folder, default the checkout's) cannot be
    added without a maintainer's review: one problem that lists every finding; none when it is clean or not found
    (then verification says it is missing)."""
    from .metadata import is_entry_name, trusted_submissions_dir
    root = Path(submissions) if submissions is not None else trusted_submissions_dir()
    if root is None or not is_entry_name(name) or not (root / name).is_dir():
        return []
    found = review_submission(root / name)
    if not found:
        return []
    return [f"the review of submissions/{name} found what may generate or look up data instead of measuring the "
            f"model: {'; '.join(found[:20])}" + (f"; and {len(found) - 20} more" if len(found) > 20 else "")
            + ". A measure computes from the model and training set it is given (ctx) only; if a maintainer read the "
              "code and it does, add it with --reviewed"]
