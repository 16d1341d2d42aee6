"""Model zoos: recipes, datasets, batched training, storage and the `Zoo` reader."""
from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".build": ("build_zoo",),
    ".recipe": ("Recipe", "list_recipes", "load_recipe"),
    ".storage": ("Zoo", "load_zoo", "local_zoos"),
})  # imported on first use
