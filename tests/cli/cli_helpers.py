"""The CLI tests' entry point and contract check: ``mgmatch ARGS`` and the one-line error every bad
input must end in (exit 2, one line on stderr, no traceback).

:func:`run` calls the console script's own function, :func:`mgmatch.cli.main`, in this process, with
its own ``sys.argv``, standard streams, working directory and environment, and turns its ``SystemExit``
(or an uncaught exception, printed as Python prints it, exit 1) into a :class:`subprocess.CompletedProcess`.
What a process adds is the interpreter's start, the same for every command: each command as a process cost
about a second of imports, and these tests run hundreds of them. ``process=True``, and the commands that
run until they are stopped (``serve``, ``worker``), run as a real process, ``python -m mgmatch ARGS``;
tests/cli/test_cli.py keeps cases of both.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import traceback
import warnings

#: commands that serve until they are stopped: always a process of their own
PROCESS_COMMANDS = {"serve", "worker"}


class _Timeout(BaseException):
    """The in-process run took longer than its timeout (a BaseException: the CLI's handlers don't catch it)."""


def _stream() -> io.TextIOWrapper:
    """A text stream with a binary ``buffer``, like a process's standard streams."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="backslashreplace")


def run(*args, cwd=None, timeout: float = 300, process: bool = False) -> subprocess.CompletedProcess:
    """``mgmatch ARGS`` as users run it: its exit status, stdout and stderr (module doc)."""
    argv = [str(a) for a in args]
    if process or (argv and argv[0] in PROCESS_COMMANDS):
        return subprocess.run([sys.executable, "-m", "mgmatch", *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
    from mgmatch.cli import main

    out, err = _stream(), _stream()
    saved_argv, saved_env, saved_cwd = sys.argv, dict(os.environ), os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def expire(signum, frame):
        raise _Timeout

    old_alarm = signal.signal(signal.SIGALRM, expire)
    code: int = 0
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            sys.argv = ["mgmatch", *argv]
            if cwd is not None:
                os.chdir(cwd)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                main(argv)
            except SystemExit as exit_:
                if exit_.code is None or isinstance(exit_.code, int):
                    code = exit_.code or 0
                else:  # sys.exit("message"): printed, status 1
                    print(exit_.code, file=sys.stderr)
                    code = 1
            except _Timeout:
                raise subprocess.TimeoutExpired(["mgmatch", *argv], timeout, _text(out), _text(err)) from None
            except Exception:  # what Python does with an uncaught exception
                traceback.print_exc()
                code = 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old_alarm)
        for s, handler in saved_signals.items():
            signal.signal(s, handler)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for h in list(root.handlers):
            if h not in saved_handlers:
                root.removeHandler(h)
        root.setLevel(saved_level)
    return subprocess.CompletedProcess(["mgmatch", *argv], code, _text(out), _text(err))


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (asserting exit 2 and no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
