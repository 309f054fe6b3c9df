"""The runner's decisions: what ``python -m compat_distribute run`` decides
about a program before its first line, beside the command line (only
``__main__`` imports this package).

* ``keras_choice``: which Keras ``tf.keras`` is for the program (Keras 2
  for a program that uses Estimator, ``run --keras``,
  ``COMPAT_DISTRIBUTE_KERAS``), chosen before TensorFlow is imported, and
  the one stderr line that says so;
* ``program_look``: the program ``run`` runs (a script, or ``-m`` a
  module), and the bounded look through its sources and the modules they
  import for a use of Estimator, or of ``MultiWorkerMirroredStrategy``;
* ``evidence``: what one source shows: its uses of one of them (imports
  and attributes such as ``tf.estimator``, in code the running TensorFlow
  can reach; never a string), one list of what counts per decision, and
  the modules it imports;
* ``version_guards``: the running TensorFlow's version, and which way a
  program's test of it (``if tf.__version__ < "2.16":``) goes;
* ``multi_worker``: whose ``MultiWorkerMirroredStrategy`` the program gets
  (``run --multi-worker``), and whether this task of ``TF_CONFIG`` runs
  the program or serves it (then it serves here), for a program that
  makes the strategy (the look, as for Estimator).

Imports no TensorFlow before the program's Keras is chosen; of the package,
``runtime`` (the logger), and ``cluster`` when a task serves.
"""
