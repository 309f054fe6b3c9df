"""The bottom layer: what every other layer needs.

* ``context``: entering and leaving strategy scopes and replica contexts
  (TensorFlow's per-graph strategy stack);
* ``devices``: device names, the host CPU, default compute devices, where
  a variable is placed;
* ``logs``: the package logger and the one-time deprecation warning;
* ``errors``: ``Error``, the base class of every error the package defines;
* ``types``: the named types of the package's signatures.

Imports nothing of the package but ``_tf_private`` / ``_tf_compat``.
"""
