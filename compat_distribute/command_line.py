"""Command-line conventions shared by ``python -m compat_distribute`` and its
commands: a mistake on the command line prints the command's short usage and
one message and exits with status 2 (as argparse does); ``--help`` is plain
text.

>>> print(plain_text("runs ``python SCRIPT`` with ``install()``"))
runs python SCRIPT with install()
"""
from __future__ import annotations

import re
import sys
from typing import Any, Callable, NoReturn, Sequence

HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "--helpfull", "-?")


def plain_text(text: str) -> str:
  """``text`` without reStructuredText's inline literal markup."""
  return re.sub(r"``(.+?)``", r"\1", text)


def usage_error(prog: str, short_usage: str, message: str) -> NoReturn:
  """Prints ``short_usage`` and ``PROG: error: MESSAGE`` to stderr and exits
  with status 2."""
  sys.stderr.write(f"{short_usage}{prog}: error: {message}\n")
  sys.exit(2)


def absl_short_usage(prog: str, flag_list: Sequence[Any],
                     metavars: dict[str, str]) -> str:
  """``usage: PROG [--flag VALUE] ...`` for absl flags, wrapped at 79
  columns.  A flag's value is shown as ``metavars[name]``, else its choices,
  ``N`` for a number or ``VALUE``.

  >>> from absl import flags
  >>> own = flags.FlagValues()
  >>> _ = flags.DEFINE_enum("api", "v2", ["v1", "v2"], "API.", flag_values=own)
  >>> _ = flags.DEFINE_integer("epochs", 3, "Epochs.", flag_values=own)
  >>> _ = flags.DEFINE_string("out", None, "File.", flag_values=own)
  >>> print(absl_short_usage("prog", [own[n] for n in own], {"out": "FILE"}))
  usage: prog [--api v1|v2] [--epochs N] [--out FILE]
  <BLANKLINE>
  """
  parts = []
  for flag in flag_list:
    if flag.flag_type() == "bool":  # a switch: no value
      parts.append(f"[--{flag.name}]")
      continue
    choices = getattr(flag.parser, "enum_values", None)
    value = metavars.get(flag.name) or (
        "|".join(choices) if choices else
        "N" if flag.flag_type() in ("int", "float") else "VALUE")
    parts.append(f"[--{flag.name} {value}]")
  lines = [f"usage: {prog}"]
  for part in parts:  # wrapped between flags, never inside one
    if len(lines[-1]) + 1 + len(part) > 79 and lines[-1].strip():
      lines.append(" " * len(f"usage: {prog}"))
    lines[-1] += " " + part
  return "\n".join(lines) + "\n"


def run_absl(main: Callable[[Sequence[str]], int], argv: Sequence[str],
             short_usage: str, help_text: str) -> int:
  """Runs ``main`` as an absl program (``absl.app.run``) on ``argv``
  (``argv[0]``: the program's name), except that ``--help`` prints
  ``help_text`` and returns 0, and a flag absl rejects or an
  ``app.UsageError`` from ``main`` is a usage error (status 2) instead of
  absl's print-the-main-module's-docstring, status 1."""
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  argv = list(argv)
  prog = argv[0]
  if any(a in HELP_FLAGS for a in argv[1:]):
    sys.stdout.write(help_text)
    return 0

  def parse(args: list[str]) -> list[str]:
    try:
      return flags.FLAGS(args)
    except flags.Error as e:
      usage_error(prog, short_usage, str(e))

  def main_with_usage_errors(args: Sequence[str]) -> int:
    try:
      return main(args)
    except app.UsageError as e:
      usage_error(prog, short_usage, str(e))

  app.run(main_with_usage_errors, argv=argv, flags_parser=parse)
  return 0  # not reached: app.run exits
