"""Model zoos: recipes, datasets, batched training, storage and the `Zoo` reader."""
from .build import build_zoo
from .recipe import Recipe, list_recipes, load_recipe
from .storage import Zoo, load_zoo, local_zoos

__all__ = ["Recipe", "Zoo", "build_zoo", "list_recipes", "load_recipe", "load_zoo", "local_zoos"]
