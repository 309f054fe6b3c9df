"""tools/parity_table.py: docs/estimator.md's parity table from the
outcomes the Estimator parity tests write."""
import importlib.util
import json

import pytest

import support

_spec = importlib.util.spec_from_file_location(
    "parity_table", support.ROOT / "tools" / "parity_table.py")
parity_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity_table)


def _write(folder, name, rows):
  (folder / name).write_text(json.dumps(rows))


def test_a_run_replaces_its_versions_column_and_keeps_the_others(tmp_path):
  _write(tmp_path, "a.json", [
      {"case": "LinearRegressor", "strategy": "OneDevice v1", "tf": "2.12",
       "outcome": "equal"},
      {"case": "LinearRegressor", "strategy": "CentralStorage v1",
       "tf": "2.12", "outcome": "raises as native"}])
  first = parity_table.merge(
      f"intro\n{parity_table.START}\n{parity_table.END}\nrest\n",
      parity_table.read_results(tmp_path))
  assert first.startswith("intro\n") and first.endswith("\nrest\n")
  newer = tmp_path / "newer"
  newer.mkdir()
  _write(newer, "b.json", [
      {"case": "LinearRegressor", "strategy": "OneDevice v1", "tf": "2.21",
       "outcome": "equal"}])
  page = parity_table.merge(first, parity_table.read_results(newer))
  assert parity_table.render(parity_table.read_table(page)).splitlines()[
      1:] == [
          "| case | strategy | TF 2.21 | TF 2.12 |",
          "|---|---|---|---|",
          "| `LinearRegressor` | CentralStorage v1 |  | raises as native |",
          "| `LinearRegressor` | OneDevice v1 | equal | equal |",
          parity_table.END]
  # A new run of 2.12 replaces that column: a case it did not run is gone.
  again = tmp_path / "again"
  again.mkdir()
  _write(again, "c.json", [
      {"case": "LinearRegressor", "strategy": "OneDevice v1", "tf": "2.12",
       "outcome": "equal"}])
  cells = parity_table.read_table(
      parity_table.merge(page, parity_table.read_results(again)))
  assert cells == {("LinearRegressor", "OneDevice v1"): {
      "2.21": "equal", "2.12": "equal"}}

def test_an_unknown_outcome_is_refused(tmp_path):
  _write(tmp_path, "a.json", [{"case": "c", "strategy": "s", "tf": "2.21",
                               "outcome": "close enough"}])
  with pytest.raises(ValueError, match="close enough"):
    parity_table.read_results(tmp_path)
