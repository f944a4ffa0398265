"""Bad input to the offline commands (label, train, fit-engagement): exit 2, one line naming the flag or
path, never a traceback, and refused before any work starts."""

from __future__ import annotations

import errno
import gzip
import sys
import time
from functools import partial
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_line_error  # noqa: E402
from cli_helpers import run as cli_run  # noqa: E402

from mgmatch.app.cli import path_error_message  # noqa: E402

run = partial(cli_run, timeout=120)  # as tests/cli/test_cli.py: the real entry point



@pytest.mark.service
@pytest.mark.parametrize("args", [
    ["--preset", "3v3", "--time-limit-s", "inf"],
    ["--preset", "12v12-deep", "--time-limit-s", "1e30"],
    ["--preset", "3v3", "--time-limit-s", "nan"],
    ["--preset", "3v3", "--time-limit-s", "86400.5"],
])
def test_label_time_limit_must_be_finite_and_at_most_a_day(tmp_path, args):
    line = one_line_error(run("label", *args, "--count", "1", "--out", tmp_path / "d", "--no-progress"))
    assert "--time-limit-s" in line
    assert not (tmp_path / "d").exists()


@pytest.mark.service
def test_label_out_under_a_file_names_the_path(tmp_path):
    (tmp_path / "afile").write_text("x")
    line = one_line_error(run("label", "--preset", "3v3", "--count", "1", "--out", tmp_path / "afile" / "x",
                              "--no-progress"))
    assert str(tmp_path / "afile") in line and "directory" in line.lower()


@pytest.mark.service
def test_train_out_that_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "data").mkdir()
    line = one_line_error(run("train", "--data", tmp_path / "data", "--out", tmp_path / "afile"))
    assert "--out" in line and "afile" in line


@pytest.mark.service
@pytest.mark.parametrize("flag,value", [("--threads", "0"), ("--threads", "-3"), ("--limit", "0"),
                                        ("--hidden", "4000000"), ("--rounds", "100000")])
def test_train_bounds(tmp_path, flag, value):
    line = one_line_error(run("train", "--data", tmp_path / "none", "--out", tmp_path / "out", flag, value))
    assert line.startswith(f"mgmatch: {flag} ")
    assert not (tmp_path / "out").exists()


@pytest.mark.service
def test_fit_log_that_is_not_gzip(tmp_path):
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_text("not gzip\n")
    line = one_line_error(run("fit-engagement", "--logs", bad, "--out", tmp_path / "m.json", "--quiet"))
    assert "--logs" in line and "bad.jsonl.gz" in line and "gzip" in line


@pytest.mark.service
def test_fit_log_that_is_truncated(tmp_path):
    data = gzip.compress(b"\n" * 200_000)  # blank lines (skipped): the reader reaches the cut
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    line = one_line_error(run("fit-engagement", "--logs", cut, "--out", tmp_path / "m.json", "--quiet"))
    assert "--logs" in line and "cut.jsonl.gz" in line and "truncated" in line
    assert "aborted" not in line


@pytest.mark.service
@pytest.mark.parametrize("preset,players", [("3v3", 20), ("3v3", 47), ("12v12", 100), ("12v12", 191)])
def test_fit_preset_world_too_small_for_the_simulator(tmp_path, preset, players):
    line = one_line_error(run("fit-engagement", "--preset", preset, "--players", str(players),
                              "--out", tmp_path / "m.json", "--quiet"))
    assert line.startswith("mgmatch: --players ")


@pytest.mark.service
@pytest.mark.parametrize("flag,value", [("--matches", "1000000000000"), ("--holdout", "1000000000000"),
                                        ("--matches", "0"), ("--embed-dim", "100000000"),
                                        ("--player-layers", "64,100000"), ("--head-layers", "100000")])
def test_fit_preset_sizes_are_bounded(tmp_path, flag, value):
    line = one_line_error(run("fit-engagement", "--preset", "3v3", flag, value, "--out", tmp_path / "m.json",
                              "--quiet"))
    assert line.startswith(f"mgmatch: {flag}")
    assert not (tmp_path / "m.json").exists()


def test_path_errors_only_for_a_path_the_user_gave():
    assert path_error_message(NotADirectoryError(errno.ENOTDIR, "Not a directory", "a/x")) == "a/x: Not a directory"
    assert path_error_message(FileExistsError(errno.EEXIST, "File exists", "out")) == "out: File exists"
    assert path_error_message(PermissionError(errno.EACCES, "Permission denied", b"p")) == "p: Permission denied"
    assert path_error_message(FileNotFoundError(errno.ENOENT, "No such file or directory")) is None  # no file name
    assert path_error_message(OSError(errno.EIO, "I/O error", "f")) is None  # not a bad path: a real failure
    assert path_error_message(gzip.BadGzipFile("Not a gzipped file")) is None


@pytest.mark.service
def test_fit_engagement_out_under_a_file_is_refused_before_the_fit(tmp_path):
    """The fit took minutes and only then failed to write under a file; the folder is checked first."""
    (tmp_path / "afile").write_text("x")
    t0 = time.perf_counter()
    line = one_line_error(run("fit-engagement", "--preset", "3v3", "--out", tmp_path / "afile" / "m.json"))
    assert "--out" in line and "afile" in line
    assert time.perf_counter() - t0 < 60
