"""docs/cluster.md's commands for several hosts, run as printed on loopback.

* "TF2: the same CentralStorageStrategy program on a cluster": its ```sh
  block gives the cluster first (``CLUSTER``, the one line the page says
  to write per site, then ``task()``), then each host's command after a
  ``# on hostN (what it runs):`` line.  Each host's command runs in a
  ``sh`` of its own, after the block's cluster lines with only the
  ``CLUSTER`` line replaced by one naming four free loopback ports; every
  other line is the page's, and ``python`` is this test's Python.
* "Estimator: ``train_and_evaluate`` on the cluster": its block is one
  ``sh`` script (the ps, chief and worker in the background, the
  evaluator last) with two per-site lines, ``CLUSTER`` and ``MODEL_DIR``;
  it runs as printed but those two (loopback ports; a folder of this
  test's).
* "Under a cluster manager": each container's ``command:`` in the YAML
  block is read by the runner's own parsers (``serve``'s options, ``run``'s
  options), then run on a loopback cluster as its pods would run it: the
  worker and ps pods' command for every worker and ps, the chief pod's for
  the chief, each with its task's ``TF_CONFIG`` (what a pod's environment
  gives) and ``train.py`` being the page's ``train_fit.py``.

The first runs in every environment; the other two, beyond that one
representative, in ``tox -e multi-worker`` (the cluster manager's, as the
cluster cases of tests/clients/cluster/test_multi_worker.py) and ``tox -e
more`` (the Estimator's, which needs tensorflow-estimator).  Checked for the first and
the last: the chief's program trains on the two workers' replicas and
ends with status 0, and every ``serve`` ends with status 0 once the chief
says the job is done; for the Estimator's, the evaluator's status 0 and
the chief's last checkpoint.  Ports picked free; every wait bounded;
every process stopped.
"""
import json
import os
import re
import shlex
import signal
import sys

import pytest

from compat_distribute import __main__ as runner
from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
from compat_distribute.cluster import serve
import support
from support.estimator import needs_estimator

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

PAGE = (support.ROOT / "docs" / "cluster.md").read_text()
TIMEOUT = 300  # seconds, for the chief's program
ESTIMATOR_TIMEOUT = 480  # seconds, for the Estimator section's script
# `python` on the page is this test's Python.
ENV = {"PYTHONPATH": str(support.ROOT), "TF_CONFIG": None,
       "PATH": os.pathsep.join([os.path.dirname(sys.executable),
                                os.environ.get("PATH", "")])}


def loopback_cluster():
  chief, worker0, worker1, ps = (f"127.0.0.1:{port}"
                                 for port in local_cluster.free_ports(4))
  return {"chief": [chief], "worker": [worker0, worker1], "ps": [ps]}


def sh_block(containing):
  """The one ```sh block of the page that contains ``containing``."""
  found = [body for body in re.findall(r"^```sh\n(.*?)^```$", PAGE,
                                       re.M | re.S) if containing in body]
  assert len(found) == 1, f"docs/cluster.md: {len(found)} blocks with {containing!r}"
  return found[0]


def for_this_site(text, **values):
  """``text`` with each per-site line ``NAME=...`` (or ``export
  NAME=...``; a quoted value may span lines) of ``values`` giving that
  value instead, quoted for ``sh``; nothing else changes."""
  for name, value in values.items():
    text, count = re.subn(
        rf"^(export )?{name}=('[^']*'|\S+)$",
        lambda match, v=value: f"{match.group(1) or ''}{name}={shlex.quote(v)}",
        text, flags=re.M)
    assert count == 1, f"one {name} line"
  return text


def cluster_value(cluster):
  """``CLUSTER`` on the page: the cluster part of a TF_CONFIG."""
  return '"cluster": ' + json.dumps(cluster)


def central_storage_commands(cluster):
  """The cluster lines of the TF2 section's block (its ``CLUSTER`` line
  naming ``cluster``) and {what the host runs: its command}."""
  block = support.doc_program(
      "cluster.md", "on every host: the cluster (CLUSTER: your hosts and "
      "ports)", "sh")
  lines = block.splitlines()
  end = next(i for i, line in enumerate(lines) if line.startswith("task() "))
  preamble = for_this_site("\n".join(lines[:end + 1]),
                           CLUSTER=cluster_value(cluster))
  commands = {}
  for comment, command in zip(lines, lines[1:]):
    match = re.fullmatch(r"# on host\d \(([^)]*)\).*", comment)
    if match:
      commands[match.group(1)] = command
  return preamble, commands


def yaml_commands():
  """Each container's ``command:`` list of the YAML block, by name."""
  match = re.search(r"^```yaml\n(.*?)^```$", PAGE, re.M | re.S)
  assert match, "docs/cluster.md has no YAML block"
  found = re.findall(r"- name: (\w+)\n\s+command: (\[.*?\])", match.group(1),
                     re.S)
  return {name: json.loads(command) for name, command in found}


def run_tasks(tmp_path, servers, chief):
  """Starts ``servers`` ({task: (argv, environment)}), then ``chief``
  ((argv, environment)) in ``tmp_path``; the results by task ("chief" for
  the chief's)."""
  logs, processes = [], {}
  try:
    for task, (argv, env) in [*servers.items(), ("chief", chief)]:
      processes[task] = local_cluster.start_process(
          argv, {**ENV, **env}, logs, cwd=str(tmp_path))
      processes[task].task = task
    results = {"chief": local_served.collect(processes["chief"], TIMEOUT)}
    for task in servers:
      results[task] = local_served.collect(processes[task], 60)
    return results
  finally:
    for process in processes.values():
      local_cluster.stop_process(process)
    for log in logs:
      log.close()


def check(results):
  chief = results.pop("chief")
  assert chief.returncode == 0 and not chief.timed_out, (
      chief.stdout[-2000:], chief.stderr[-5000:])
  assert "replicas: 2" in chief.stdout.splitlines()
  assert "final weights: " in chief.stdout
  for task, result in results.items():
    assert result.returncode == 0 and not result.timed_out, (
        task, result.stdout[-2000:], result.stderr[-3000:])
    assert result.stdout.splitlines()[-1] == (
        "compat_distribute serve: exit status 0"), (task, result.stdout)


def test_each_hosts_command_of_the_tf2_section_runs_as_printed(tmp_path):
  (tmp_path / "train_fit.py").write_text(
      support.doc_program("cluster.md", "train_fit.py"))
  preamble, commands = central_storage_commands(loopback_cluster())
  assert sorted(commands) == ["ps 0", "the chief", "worker 0", "worker 1"]
  shell = {task: (["sh", "-c", f"{preamble}\n{command}"], {})
           for task, command in commands.items()}
  check(run_tasks(tmp_path, {task: shell[task] for task in
                             ("worker 0", "worker 1", "ps 0")},
                  shell["the chief"]))
  assert "ckpt-1.index" in os.listdir(tmp_path / "model")


@support.MULTI_WORKER_ALL
def test_the_cluster_manager_commands_parse_and_run(tmp_path):
  commands = yaml_commands()
  assert sorted(commands) == ["chief", "task"]
  served, run = commands["task"], commands["chief"]
  assert served[:4] == run[:3] + ["serve"] == [
      "python", "-m", "compat_distribute", "serve"]
  # What the runner itself reads of them.
  assert serve.parse_args(served[4:]).return_wait == 120
  plan, keras, program = runner._run_options(run[4:])  # pylint: disable=protected-access
  assert (plan.max_restarts, plan.task_wait, plan.checkpoint_dir, keras,
          program) == (5, 60, "/backup", None, ["train.py"])
  (tmp_path / "train.py").write_text(
      support.doc_program("cluster.md", "train_fit.py"))
  cluster = loopback_cluster()

  def pod(argv, job, index):
    return ([sys.executable, *argv[1:]],
            {"TF_CONFIG": local_cluster.tf_config(cluster, job, index)})

  check(run_tasks(
      tmp_path, {f"{job} {index}": pod(served, job, index)
                 for job in ("worker", "ps")
                 for index in range(len(cluster[job]))},
      pod(run, "chief", 0)))


@support.MORE  # tox -e more has Estimator (tox -e multi-worker has not)
@needs_estimator
def test_the_estimator_commands_run_as_printed(tmp_path):
  """The v1 Estimator section's block, one ``sh`` script as printed but
  its two per-site lines (``CLUSTER``: loopback ports; ``MODEL_DIR``: a
  folder of this test's): the ps, chief and worker in the background, the
  evaluator last; the script ends with the evaluator, after the chief's
  last checkpoint.  The ps serves until stopped: this test stops it."""
  (tmp_path / "train_estimator.py").write_text(
      support.doc_program("cluster.md", "train_estimator.py"))
  ports = local_cluster.free_ports(4)
  cluster = {job: [f"127.0.0.1:{port}"] for job, port in
             zip(("chief", "worker", "ps", "evaluator"), ports)}
  model_dir = tmp_path / "model"
  script = for_this_site(sh_block("train_estimator.py"),
                         CLUSTER=cluster_value(cluster),
                         MODEL_DIR=str(model_dir))
  logs = []
  process = local_cluster.start_process(["sh", "-c", script], ENV, logs,
                                        cwd=str(tmp_path))
  process.task = "the page's commands"
  try:
    result = local_served.collect(process, ESTIMATOR_TIMEOUT)
  finally:
    try:  # the ps, and anything left of the script
      os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    for log in logs:
      log.close()
  assert result.returncode == 0 and not result.timed_out, (
      result.stdout[-2000:], result.stderr[-5000:])
  # max_steps=1000; the worker's steps run beside the chief's (asynchronous
  # ParameterServer training), so the chief's last checkpoint can be a few
  # steps past 1000 (1002 seen).
  checkpoint = re.compile(r"model\.ckpt-(\d+)\.index$")
  steps = [int(m.group(1)) for m in map(checkpoint.match,
                                        os.listdir(model_dir)) if m]
  assert max(steps) >= 1000, sorted(steps)
  assert os.listdir(model_dir / "eval")
