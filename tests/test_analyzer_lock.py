"""The analyzer lock lives in a private directory and never follows a planted symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.errors import PowerError
from power.lock import analyzer_lock, lock_holder


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    victim = tmp_path / "precious.txt"
    victim.write_text("do not truncate me\n")
    (locks / "wt.lock").symlink_to(victim)
    with pytest.raises(PowerError) as caught, analyzer_lock("wt", "run-1", lock_dir=locks):
        pass
    assert "a symlink is never followed" in str(caught.value)
    assert str(locks) in str(caught.value) and "SUBRUN_LOCK_DIR" in str(caught.value)
    assert victim.read_text() == "do not truncate me\n"
    with pytest.raises(PowerError):
        lock_holder("wt", lock_dir=locks)


def test_a_symlinked_lock_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PowerError, match="cannot be opened as a directory"), \
            analyzer_lock("wt", "run-1", lock_dir=tmp_path / "link"):
        pass
    assert list(real.iterdir()) == []


def test_a_directory_others_may_write_to_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # what /var/tmp itself is
    with pytest.raises(PowerError, match="others may write to it"), \
            analyzer_lock("wt", "run-1", lock_dir=shared):
        pass


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(PowerError, match="belongs to another user"), \
            analyzer_lock("wt", "run-1", lock_dir=theirs):
        pass


def test_a_fresh_lock_directory_is_private_and_works(tmp_path: Path) -> None:
    locks = tmp_path / "new" / "locks"
    with analyzer_lock("wt", "run-1", lock_dir=locks) as path:
        holder = lock_holder("wt", lock_dir=locks)
        assert holder is not None and holder["holder"] == "run-1"
        assert (path.stat().st_mode & 0o777) == 0o600
    assert (locks.stat().st_mode & 0o777) == 0o700
    assert lock_holder("wt", lock_dir=locks) is None
