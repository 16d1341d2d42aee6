"""Imports every module of the built-in catalogue, which registers its measures."""
from . import margin, output  # noqa: F401
from . import norm, pacbayes  # noqa: F401
from . import layer, pgdl  # noqa: F401
from . import marginal  # noqa: F401
