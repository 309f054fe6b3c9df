"""Installs compat_distribute; v1/ and v2/ become compat_distribute.v1/.v2."""
from setuptools import setup

setup(
    name="compat_distribute",
    version="0.1.0",
    description=("Single-machine tf.distribute strategies re-implemented on "
                 "low-level TensorFlow primitives, with v1 and v2 facades."),
    python_requires=">=3.11",
    packages=[
        "compat_distribute",
        "compat_distribute._tf_private",
        "compat_distribute.api",
        "compat_distribute.cluster",
        "compat_distribute.demo",
        "compat_distribute.estimator",
        "compat_distribute.input",
        "compat_distribute.replicas",
        "compat_distribute.runner",
        "compat_distribute.runtime",
        "compat_distribute.strategies",
        "compat_distribute.values",
        "compat_distribute.variables",
        "compat_distribute.v1",
        "compat_distribute.v1.experimental",
        "compat_distribute.v2",
        "compat_distribute.v2.experimental",
    ],
    package_dir={
        "compat_distribute": "compat_distribute",
        "compat_distribute.v1": "v1",
        "compat_distribute.v1.experimental": "v1/experimental",
        "compat_distribute.v2": "v2",
        "compat_distribute.v2.experimental": "v2/experimental",
    },
    package_data={"compat_distribute": ["py.typed"]},
    install_requires=["numpy", "absl-py"],
    extras_require={
        # TensorFlow is an extra so the shim never installs a second TF build
        # next to the one the user already has.
        # The TensorFlow minors this release is tested on (docs/compatibility.md).
        "cpu": ["tensorflow-cpu>=2.12,<2.23"],
        "gpu": ["tensorflow>=2.12,<2.23"],
        "test": ["pytest"],
        # benchmarks/sweep.py's plot (the tables are written without it).
        "bench": ["matplotlib"],
        # TensorFlow Estimator on TensorFlow 2.16+ (docs/estimator.md):
        # Estimator's last release, and TensorBoard, which tensorflow-cpu
        # 2.16+ no longer brings and tf.summary needs (pip picks the newest
        # release that agrees with the installed TensorFlow's protobuf).
        # Not tf-keras: it requires the `tensorflow` distribution, a second
        # TensorFlow beside tensorflow-cpu; install the one of your
        # TensorFlow minor with --no-deps.
        "estimator": ["tensorflow-estimator==2.15.0",
                      "tensorboard>=2.16,<2.23"],
        # The documentation site (mkdocs.yml), built from the source without
        # importing TensorFlow; pinned, since the strict build's warnings and
        # its pages depend on these versions.  Ruff lays out the signatures.
        "docs": ["mkdocs==1.6.1", "mkdocs-material==9.8.1",
                 "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11",
                 "griffe==2.4.1", "ruff==0.17.6"],
        # ... and its check in a real browser (tests/docs/browser_check.py),
        # which also needs Debian's chromium and chromium-driver.
        "docs-browser": ["mkdocs==1.6.1", "mkdocs-material==9.8.1",
                         "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11",
                         "griffe==2.4.1", "ruff==0.17.6", "selenium>=4.30,<5"],
    },
)
