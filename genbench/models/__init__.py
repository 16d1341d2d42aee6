"""Architecture families (MLP, 1-D CNN, NiN, ResNet-32 v2, Keras Sequential), each naming its probe layers."""
from .registry import build_model, family_class, list_families, register_family
from . import mlp  # noqa: F401  (registers the family)
from . import cnn1d, keras, nin, resnet  # noqa: F401

__all__ = ["build_model", "family_class", "list_families", "register_family"]
