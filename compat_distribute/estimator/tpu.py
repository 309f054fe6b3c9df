"""Stand-ins for the three TPU modules TensorFlow 2.16 removed and Estimator
2.15 still imports.

Estimator's ``tpu/`` package imports ``session_support``,
``tpu_embedding`` and ``tpu_embedding_gradient`` from TensorFlow at import
time, and ``tensorflow_estimator`` imports its ``tpu/`` package whenever
it is imported, so without these modules no Estimator program starts.  Only
``TPUEstimator`` on TPU hardware uses them.  The stand-ins hold every name
Estimator looks up (classes stay classes, so its ``isinstance`` checks and
module-level tuples work) and raise ``TPUEstimatorUnsupportedError`` the
moment one is used:

>>> modules = stand_in_modules()
>>> sorted(modules)
['session_support', 'tpu_embedding', 'tpu_embedding_gradient']
>>> modules["tpu_embedding"].AdamParameters(learning_rate=0.1)
Traceback (most recent call last):
...
compat_distribute.estimator.errors.TPUEstimatorUnsupportedError: tpu_embedding.AdamParameters is TPUEstimator functionality, which compat_distribute does not supply: ...
>>> isinstance(object(), modules["tpu_embedding"].AdagradParameters)
False
"""
from __future__ import annotations

import types
from typing import Callable, NoReturn

from compat_distribute.estimator.errors import TPUEstimatorUnsupportedError

# Module key (see _tf_private.ESTIMATOR_MODULES) -> the classes and the
# functions Estimator reads from that module.
_CLASSES: dict[str, tuple[str, ...]] = {
    "session_support": (
        "GracefulShutdownHook", "ResetComputation", "ShutdownAllWorkers",
        "ShutdownLameWorkers"),
    "tpu_embedding": (
        "AdagradParameters", "AdamParameters", "FtrlParameters",
        "MomentumParameters", "ProximalAdagradParameters",
        "RMSPropParameters", "StochasticGradientDescentParameters",
        "AdagradSlotVariableNames", "AdamSlotVariableNames",
        "FtrlSlotVariableNames", "MomentumSlotVariableNames",
        "ProximalAdagradSlotVariableNames", "RMSPropSlotVariableNames",
        "EnqueueData", "FeatureConfig", "TableConfig", "TPUEmbedding"),
    "tpu_embedding_gradient": (),
}
_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "session_support": ("start_worker_watchdog",),
    "tpu_embedding": ("table_to_config_dict",),
    "tpu_embedding_gradient": (
        "create_dummy_table_variables",
        "get_gradients_through_dummy_table_variables",
        "hook_dummy_table_variables_to_activations"),
}
# The two modes of a TPU embedding, which Estimator compares against.
_CONSTANTS: dict[str, dict[str, str]] = {
    "tpu_embedding": {"TRAINING": "training", "INFERENCE": "inference"},
}


def _refuse(what: str) -> NoReturn:
  raise TPUEstimatorUnsupportedError(what)


def _stand_in_class(module_key: str, name: str) -> type:
  """A class named ``name`` whose construction is refused."""
  what = f"{module_key}.{name}"

  def __init__(self: object, *args: object, **kwargs: object) -> None:
    del self, args, kwargs
    _refuse(what)

  return type(name, (), {
      "__init__": __init__, "__module__": __name__,
      "__doc__": f"Stand-in for TensorFlow 2.15's {what}; refuses use."})


def _stand_in_function(module_key: str, name: str) -> Callable[..., NoReturn]:
  what = f"{module_key}.{name}"

  def refused(*args: object, **kwargs: object) -> NoReturn:
    del args, kwargs
    _refuse(what)

  refused.__name__ = refused.__qualname__ = name
  refused.__doc__ = f"Stand-in for TensorFlow 2.15's {what}; refuses use."
  return refused


def stand_in_modules() -> dict[str, types.ModuleType]:
  """New stand-in module objects, by module key.

  The caller registers them under TensorFlow's names (the keys of
  ``_tf_private.ESTIMATOR_MODULES``).
  """
  modules = {}
  for key in _CLASSES:
    module = types.ModuleType(
        f"{__name__}.{key}",
        f"compat_distribute's stand-in for TensorFlow 2.15's TPU module "
        f"{key!r} (TPUEstimator only): every name refuses use.")
    for name in _CLASSES[key]:
      setattr(module, name, _stand_in_class(key, name))
    for name in _FUNCTIONS[key]:
      setattr(module, name, _stand_in_function(key, name))
    for name, value in _CONSTANTS.get(key, {}).items():
      setattr(module, name, value)
    modules[key] = module
  return modules
