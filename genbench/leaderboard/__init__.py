"""The leaderboard ranks and shows records, never makes them: the one ranking with rank groups (standings.py), the
columns shown (columns.py), the terminal view (terminal.py), the text exports (export.py), the static site (site.py,
templates/) with its charts (curves.py) and the DEMOGEN tables drawn from records (tables.py). It imports no torch."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".standings": ("mean_ranks", "rank_records"),
    ".site": ("write_site",),
    ".tables": ("ablation_tables",),
})  # imported on first use
