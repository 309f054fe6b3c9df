"""The only door to TensorFlow's private names.

Every other module reaches TensorFlow through public ``tf.*``, through the
helpers here, or through the sibling ``_tf_compat`` (``tf.__internal__`` and
public names that differ between versions), so that a TensorFlow upgrade
that moves one of these names breaks only this package.  Callers import the
package (``from compat_distribute import _tf_private``) and use its names;
the helpers live in one module per topic, whose docstring lists each private
name it uses, why, and on which TensorFlow versions it is there:

* ``scopes``: the calling thread's graph state -- the strategy stack, the
  variable creators, control dependencies and control flow, the summary
  state;
* ``devices``: device scopes -- the current device, the eager context's
  device scope entered cheaply, colocation, eager mode, logical devices;
* ``functions``: functions, tapes and types -- AutoGraph's do-not-convert
  rule and ``enumerate``, a ``tf.function``'s clone, gradient tapes paused,
  eager tensors, ``TypeSpec`` names, TPU systems, the Keras dataset marker;
* ``checkpoints``: the device that reads and writes a TF2 checkpoint's
  files (``route_io``, which a TF2 cluster's chief sets at connect);
* ``datasets``: how TensorFlow's ``MultiWorkerMirroredStrategy`` cuts a
  dataset for each worker -- the auto-shard rewrite, the rebatches;
* ``estimator``: what Estimator needs of TensorFlow 2.16+.  The
  ``sys.modules`` names it registers there: the four of
  ``ESTIMATOR_MODULES`` (``register_module``), and, each only when
  imported, every name of ``ESTIMATOR_PATH_MODULES`` below
  ``tensorflow.python.estimator`` (loaded by
  ``estimator.legacy_path.EstimatorPathFinder``).

Each name is present on every supported TensorFlow, 2.12 to 2.22 (checked
again on 2.22.0rc0 and on the 2.23 nightly 2.23.0.dev20261026, with the
signature it has on 2.21).

What the package registers in TensorFlow's namespace -- every
``sys.modules`` name under ``tensorflow``, ``tensorflow_estimator``,
``keras`` or ``tf_keras``, every attribute it adds to or rebinds in one of
their modules, every ``sys.meta_path`` finder, every import loader it
wraps or supplies, every export-registry entry and environment variable
-- is in the table below, one line each, and nothing else is
(tests/project/test_tf_namespace.py performs ``install()`` and reads this
table: a name registered but not listed, or listed but never registered,
fails).  ``name`` is a pattern (``*`` matches any text, dots included).
``when``: ``always`` (every ``install()``); ``supply`` (only where
TensorFlow lacks Estimator's pieces, 2.16 on, when Estimator's names are
used); ``estimator`` (as ``supply``, only where Estimator imports:
tensorflow-estimator and tf-keras installed; elsewhere each use is refused
with the package's error); ``unloaded`` (only where no module of that name
is loaded yet); ``no_tensorboard`` (as ``estimator``, only where
TensorBoard is not installed); ``auto_strategy`` (only where TensorFlow has
``tf.distribute.experimental.auto_strategy``); ``checkout`` (importing the
package from a source checkout; it serves ``compat_distribute.v1/v2``
only); ``cluster`` (a TF2 program's chief connecting to its cluster,
never ``install()``).

=========  ===========================================================  ==============  ==============================
kind       name                                                         when            by
=========  ===========================================================  ==============  ==============================
attribute  tensorflow*.distribute.*Strategy                             always          install: TF's class -> ours
attribute  tensorflow*.distribute.experimental.auto_strategy            auto_strategy   install: TF's -> ours
module     tensorflow.compat.*.distribute                               unloaded        install: the module it patched
module     tensorflow.compat.*.distribute.experimental                  unloaded        install: the module it patched
module     tensorflow.compat.v1                                         unloaded        install._RebindingLoader
module     tensorflow.compat.v2                                         unloaded        install._RebindingLoader
meta_path  compat_distribute.install._RebindOnImport                    always          install
loader     compat_distribute.install._RebindingLoader                   always          install._RebindOnImport
module     tensorflow.python.distribute.estimator_training              supply          estimator.coordinator
module     tensorflow.python.tpu.session_support                        supply          estimator.tpu stand-in
module     tensorflow.python.tpu.tpu_embedding                          supply          estimator.tpu stand-in
module     tensorflow.python.tpu.tpu_embedding_gradient                 supply          estimator.tpu stand-in
attribute  tensorflow.python.distribute.estimator_training              supply          register_module
attribute  tensorflow.python.tpu.session_support                        supply          register_module
attribute  tensorflow.python.tpu.tpu_embedding                          supply          register_module
attribute  tensorflow.python.tpu.tpu_embedding_gradient                 supply          register_module
attribute  tensorflow.python.util.tf_export.ESTIMATOR_API_NAME          supply          register_estimator_api
tf_export  API_ATTRS.estimator                                          supply          register_estimator_api
tf_export  API_ATTRS_V1.estimator                                       supply          register_estimator_api
attribute  tensorflow*.estimator                                        supply          estimator.api.attach
meta_path  compat_distribute.estimator.api.EstimatorImportFinder        supply          estimator.supply
loader     compat_distribute.estimator.api._AliasLoader                 supply          EstimatorImportFinder
loader     compat_distribute.estimator.api._GuardedLoader               supply          EstimatorImportFinder
module     tensorflow.estimator                                         estimator       api._AliasLoader
module     tensorflow.estimator.*                                       estimator       api._AliasLoader
module     tensorflow.compat.v1.estimator                               estimator       api._AliasLoader
module     tensorflow.compat.v1.estimator.*                             estimator       api._AliasLoader
module     tensorflow.compat.v2.estimator                               estimator       api._AliasLoader
module     tensorflow.compat.v2.estimator.*                             estimator       api._AliasLoader
environ    TF_USE_LEGACY_KERAS                                          estimator       estimator.keras
meta_path  compat_distribute.estimator.legacy_path.EstimatorPathFinder  supply          estimator.supply
loader     compat_distribute.estimator.legacy_path._ForwardingLoader    supply          EstimatorPathFinder
module     tensorflow.python.estimator                                  supply          legacy_path._ForwardingLoader
module     tensorflow.python.estimator.*                                supply          legacy_path._ForwardingLoader
attribute  tensorflow*.summary.scalar                                   no_tensorboard  summaries.guard
attribute  tensorflow*.summary.histogram                                no_tensorboard  summaries.guard
attribute  tensorflow*.summary.image                                    no_tensorboard  summaries.guard
attribute  tensorflow*.summary.text                                     no_tensorboard  summaries.guard
attribute  tensorflow*.summary.audio                                    no_tensorboard  summaries.guard
meta_path  compat_distribute._CheckoutFacadeFinder                      checkout        compat_distribute
attribute  tensorflow.python.checkpoint.checkpoint.*.save               cluster         checkpoints.route_io
attribute  tensorflow.python.checkpoint.checkpoint.*.restore            cluster         checkpoints.route_io
attribute  tensorflow.python.checkpoint.functional_saver.*.restore      cluster         checkpoints.route_io
=========  ===========================================================  ==============  ==============================

>>> from compat_distribute import _tf_private
>>> with tf.device("/cpu:0"):
...   _tf_private.current_device()
'/job:localhost/replica:0/task:0/device:CPU:0'
"""
from __future__ import annotations

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import
from compat_distribute._tf_private.checkpoints import route_io
from compat_distribute._tf_private.datasets import auto_shard_dataset
from compat_distribute._tf_private.datasets import batch_sizes_for_worker
from compat_distribute._tf_private.datasets import compute_batch_size
from compat_distribute._tf_private.datasets import legacy_rebatch
from compat_distribute._tf_private.devices import colocate_with
from compat_distribute._tf_private.devices import current_device
from compat_distribute._tf_private.devices import device
from compat_distribute._tf_private.devices import eager_device_state
from compat_distribute._tf_private.devices import eager_mode
from compat_distribute._tf_private.devices import enter_eager_device
from compat_distribute._tf_private.devices import exit_eager_device
from compat_distribute._tf_private.devices import list_logical_devices
from compat_distribute._tf_private.devices import set_eager_device_state
from compat_distribute._tf_private.estimator import ESTIMATOR_MODULES
from compat_distribute._tf_private.estimator import ESTIMATOR_PATH
from compat_distribute._tf_private.estimator import ESTIMATOR_PATH_MODULES
from compat_distribute._tf_private.estimator import distribute_coordinator
from compat_distribute._tf_private.estimator import has_estimator_api
from compat_distribute._tf_private.estimator import has_estimator_path
from compat_distribute._tf_private.estimator import has_module
from compat_distribute._tf_private.estimator import keras_state
from compat_distribute._tf_private.estimator import python_package
from compat_distribute._tf_private.estimator import register_estimator_api
from compat_distribute._tf_private.estimator import register_module
from compat_distribute._tf_private.estimator import tb_not_installed_error
from compat_distribute._tf_private.estimator import tensorboard_stand_ins
from compat_distribute._tf_private.estimator import unregister_estimator_api
from compat_distribute._tf_private.estimator import unregister_module
from compat_distribute._tf_private.functions import EagerTensor
from compat_distribute._tf_private.functions import KerasDistributedDatasetMarker
from compat_distribute._tf_private.functions import clone_function
from compat_distribute._tf_private.functions import forbid_autograph_enumerate
from compat_distribute._tf_private.functions import initialized_tpu_systems
from compat_distribute._tf_private.functions import register_type_spec
from compat_distribute._tf_private.functions import stop_recording
from compat_distribute._tf_private.scopes import control_flow_context
from compat_distribute._tf_private.scopes import current_control_dependencies
from compat_distribute._tf_private.scopes import pop_variable_creator
from compat_distribute._tf_private.scopes import push_variable_creator
from compat_distribute._tf_private.scopes import set_strategy_stack
from compat_distribute._tf_private.scopes import set_variable_creator_stack
from compat_distribute._tf_private.scopes import strategy_stack
from compat_distribute._tf_private.scopes import strategy_stack_of
from compat_distribute._tf_private.scopes import summary_state
from compat_distribute._tf_private.scopes import tf1_saver_list
from compat_distribute._tf_private.scopes import variable_creator_stack
from compat_distribute._tf_private.scopes import variable_creators
