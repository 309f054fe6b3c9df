"""The guide pages as a reader finds them: in the order of the site's
navigation, every link and anchor resolving, performance.md one short page,
and none of the claims issue 32 found stale back again."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
  """The anchor GitHub and mkdocs' toc give a heading (inline code and
  punctuation dropped, spaces to hyphens, lower case).

  >>> slug("Past one machine, TF2: `CentralStorageStrategy` on clusters")
  'past-one-machine-tf2-centralstoragestrategy-on-clusters'
  """
  text = re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower()
  return text.replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
  text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
  return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_slug():
  assert slug("A first program: Keras") == "a-first-program-keras"
  assert slug("Estimator: a training step, TensorFlow 2.21 under "
              "compat_distribute against TensorFlow 2.15") == (
                  "estimator-a-training-step-tensorflow-221-under-"
                  "compat_distribute-against-tensorflow-215")


def test_guides_exist_in_their_order_on_the_first_page():
  index = (DOCS / "index.md").read_text()
  guides = ["keras.md", "custom_loops.md", "v1.md", "migration.md",
            "cluster.md", "estimator.md"]
  listed = index.split("## The guides", 1)[1].split("Then the details")[0]
  positions = [listed.index(f"({g})") for g in guides]
  assert positions == sorted(positions), listed
  for name in guides:
    assert (DOCS / name).exists(), name
  # A Keras program on the first page, before anything else is shown.
  first_code = re.search(r"^```python\n(.*?)^```", index, re.M | re.S)
  assert "model.fit(" in first_code.group(1)
  assert "tf.keras.Sequential" in first_code.group(1)


def test_every_link_and_anchor_resolves():
  pages = sorted(DOCS.glob("*.md")) + [ROOT / "README.md",
                                       ROOT / "benchmarks" / "RESULTS.md"]
  checked = 0
  for page in pages:
    for target in LINK.findall(page.read_text()):
      if "://" in target or target.startswith("mailto:"):
        continue
      path, _, anchor = target.partition("#")
      resolved = (page.parent / path).resolve() if path else page
      assert resolved.exists(), f"{page.name}: {target}"
      if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), (
            f"{page.relative_to(ROOT)}: no heading for #{anchor} in "
            f"{resolved.relative_to(ROOT)}")
      checked += 1
  assert checked > 50


def test_docs_link_nowhere_outside_docs():
  # The site is built from docs/ alone: a link out of it would be broken
  # there (benchmarks/RESULTS.md is named, not linked).
  for page in sorted(DOCS.glob("*.md")):
    for target in LINK.findall(page.read_text()):
      if "://" not in target:
        assert not target.startswith("../"), f"{page.name}: {target}"


def test_performance_is_one_short_page():
  text = (DOCS / "performance.md").read_text()
  assert len(text.splitlines()) < 150
  assert "![" in text and (DOCS / "sweep.png").exists()
  assert "tox -e bench" in text
  for heading in ("Ours against TensorFlow's", "Ours against the limit"):
    assert f"## {heading}" in text
  # Each measured table says when and at which commit it was measured.
  assert "2026-11-26 at commit `39baa1d`" in text
  results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
  # The dated record moved there, whole.
  for section in ("## Results at `39baa1d`", "## Results at `bdcb92d`",
                  "## Results at `d3893f1`", "## Results at `287ce28`",
                  "## The last distance to the limit", "## Earlier results",
                  "## Cross-device reduction (CentralStorageStrategy)"):
    assert section in results, section


def test_stale_claims_stay_fixed():
  differences = (DOCS / "differences.md").read_text()
  assert "`update_config_proto` waits" not in " ".join(differences.split())
  v1 = (DOCS / "v1.md").read_text()
  table = v1.split("| name | what it is |", 1)[1].split("\n\n", 1)[0]
  for name in ("experimental.ParameterServerStrategy", "RunOptions",
               "`Error`", "`InputContext`"):
    assert name in table, name
  assert "`InputContext`, `InputReplicationMode`, `ReduceOp` | TensorFlow's" \
      not in table
  compatibility = (DOCS / "compatibility.md").read_text()
  assert "8-12 minutes" not in compatibility
  assert "it skips from 2.16" not in compatibility
  readme = (ROOT / "README.md").read_text()
  assert "14 to 16 minutes" not in readme
  results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
  assert "the current\nnumbers and floors are in \"Results at `bdcb92d`\"" \
      not in results
