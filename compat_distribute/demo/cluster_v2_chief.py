"""The chief of ``demo --cluster WxP --api v2``: Keras ``fit`` on a cluster.

Run by ``demo.cluster.run_cluster_v2`` as the ``chief`` task of a loopback
cluster whose workers and ps tasks run ``python -m compat_distribute
serve``.  It trains the demo's Keras model twice in this one connected
process, with the same data and initial weights: under TensorFlow's
``CentralStorageStrategy`` given the remote devices by hand (the workers'
CPUs, ps 0's CPU; the input on this process), then under ours made from
``TF_CONFIG`` alone (the input read on the workers).  It prints both
results as one JSON line.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser()
  for name in ("epochs", "seed", "batch_size", "samples"):
    parser.add_argument(f"--{name}", type=int, required=True)
  args = parser.parse_args(argv)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from compat_distribute import v2 as distribute  # pylint: disable=g-import-not-at-top
  from compat_distribute.demo import common  # pylint: disable=g-import-not-at-top
  from compat_distribute.demo import single  # pylint: disable=g-import-not-at-top
  common.quiet_deprecations()
  data = common.make_data(args.seed, args.samples)
  ours = distribute.experimental.CentralStorageStrategy()
  native = tf.distribute.experimental.CentralStorageStrategy(
      compute_devices=list(ours.extended.worker_devices),
      parameter_device=ours.extended.parameter_devices[0])
  results = {}
  for impl, strategy, label in (("native", native, "native TF"),
                                ("ours", ours, "compat_distribute")):
    print(f"\n== {label}: {strategy!r} ==", file=sys.stderr, flush=True)
    # TensorFlow 2.12: train_v2 seeds (tf.random.set_seed clears the
    # context's caches), and clearing them blocks for ever while the last
    # fit's dropped objects, left for the garbage collector, still hold the
    # remote input; collecting them first avoids it (docs/compatibility.md).
    gc.collect()
    results[impl] = dataclasses.asdict(single.train_v2(
        strategy, label, data, args.epochs, args.batch_size, args.seed))
  print(json.dumps(results), flush=True)


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  main(sys.argv[1:])
