"""The leaderboard: result records (one per measure x zoo; the format in schema.py), their one ranking with rank
groups (ranking.py), the terminal/text exports (export.py) and the static site (site.py)."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".ranking": ("mean_ranks", "rank_records"),
    ".schema": ("Record", "load_records", "read_record", "write_record"),
    ".site": ("write_site",),
})  # imported on first use
