"""The leaderboard: result records (one per measure x zoo; the format in schema.py), their one ranking with rank
groups (ranking.py), the terminal/text exports (export.py) and the static site (site.py)."""
from .ranking import mean_ranks, rank_records
from .schema import Record, load_records, read_record, write_record
from .site import write_site

__all__ = ["Record", "load_records", "mean_ranks", "rank_records", "read_record", "write_record", "write_site"]
