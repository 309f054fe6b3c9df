"""The demo: ``python -m compat_distribute demo [--cluster WxP]``.

* ``single``: the command line, and the single-machine demo (one process,
  the host CPU split into logical devices);
* ``cluster``: the cluster demo (``--cluster WxP``) and its worker program,
  ``python -m compat_distribute.demo.cluster``;
* ``common``: what both share (data, weights, the TF1 step, the table).
"""
