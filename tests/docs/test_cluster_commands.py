"""docs/cluster.md's commands for several hosts, run as printed on loopback.

* "TF2: the same CentralStorageStrategy program on a cluster": its ```sh
  block gives the cluster first (``CLUSTER``, the one line the page says
  to write per site, then ``task()``), then each host's command after a
  ``# on hostN (what it runs):`` line.  Each host's command runs in a
  ``sh`` of its own, after the block's cluster lines with only the
  ``CLUSTER`` line replaced by one naming four free loopback ports; every
  other line is the page's, and ``python`` is this test's Python.
* "Under a cluster manager": each container's ``command:`` in the YAML
  block is read by the runner's own parsers (``serve``'s options, ``run``'s
  options), then run on a loopback cluster as its pods would run it: the
  worker and ps pods' command for every worker and ps, the chief pod's for
  the chief, each with its task's ``TF_CONFIG`` (what a pod's environment
  gives) and ``train.py`` being the page's ``train_fit.py``.

Checked for both: the chief's program trains on the two workers' replicas
and ends with status 0, and every ``serve`` ends with status 0 once the
chief says the job is done.  Ports picked free; every wait bounded; every
process stopped.
"""
import json
import os
import re
import shlex
import sys

import pytest

from compat_distribute import __main__ as runner
from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
from compat_distribute.cluster import serve
import support

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

PAGE = (support.ROOT / "docs" / "cluster.md").read_text()
TIMEOUT = 300  # seconds, for the chief's program
# `python` on the page is this test's Python.
ENV = {"PYTHONPATH": str(support.ROOT), "TF_CONFIG": None,
       "PATH": os.pathsep.join([os.path.dirname(sys.executable),
                                os.environ.get("PATH", "")])}


def loopback_cluster():
  chief, worker0, worker1, ps = (f"127.0.0.1:{port}"
                                 for port in local_cluster.free_ports(4))
  return {"chief": [chief], "worker": [worker0, worker1], "ps": [ps]}


def central_storage_commands(cluster):
  """The cluster lines of the TF2 section's block (its ``CLUSTER`` line
  naming ``cluster``) and {what the host runs: its command}."""
  block = support.doc_program(
      "cluster.md", "on every host: the cluster (CLUSTER: your hosts and "
      "ports)", "sh")
  lines = block.splitlines()
  end = next(i for i, line in enumerate(lines) if line.startswith("task() "))
  here = "CLUSTER=" + shlex.quote('"cluster": ' + json.dumps(cluster))
  preamble, count = re.subn(r"^CLUSTER='[^']*'$", lambda _: here,
                            "\n".join(lines[:end + 1]), flags=re.M)
  assert count == 1, "the block has one CLUSTER line"
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
