"""The leaderboard: result records (one per measure x zoo), ranking with rank groups, and the static site."""
from .site import write_site

__all__ = ["write_site"]
