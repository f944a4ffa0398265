"""The CLI tests' entry point and contract check: ``mgmatch ARGS`` in a subprocess, and the one-line
error every bad input must end in (exit 2, one line on stderr, no traceback)."""

from __future__ import annotations

import subprocess
import sys


def run(*args, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m mgmatch ARGS``: the real entry point, as users run it."""
    return subprocess.run([sys.executable, "-m", "mgmatch", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (asserting exit 2 and no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
