"""The data directory and the store's files are the user's alone: 0700 and
0600 as ``hermes-trio serve`` makes them, and wider modes an older version
left are tightened, said in one line (the real command, from outside)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest
import trio
from support import clean_env, start_serve

from hermes_trio.store import DB_FILENAME

SECRET_FILENAME = "install-secret"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def loose_umask() -> None:
    # What most desktops and servers run with: 0644 files, 0755 directories.
    os.umask(0o022)


def store_files(data: Path) -> list[Path]:
    db = data / DB_FILENAME
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


async def test_a_new_data_dir_and_its_files_are_private(tmp_path: Path) -> None:
    data = tmp_path / "state" / "data"
    env = clean_env(HERMES_DATA_DIR=str(data))
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=["--demo"], preexec_fn=loose_umask)
        # While the server runs: the WAL's files exist beside the database.
        modes = {path.name: mode(path) for path in store_files(data)}
        dir_mode = mode(data)
        secret_mode = mode(data / SECRET_FILENAME)
        nursery.cancel_scope.cancel()
    assert dir_mode == 0o700
    assert modes == {name: 0o600 for name in modes} and len(modes) == 3
    assert secret_mode == 0o600
    # Nothing was loose, so nothing is said about it.
    assert not [line for line in served.output if "made private" in line]


async def test_loose_modes_left_by_an_older_version_are_tightened_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    db = data / DB_FILENAME
    # Another process has the file open in WAL mode: its -wal and -shm exist.
    holder = sqlite3.connect(db)
    try:
        holder.execute("PRAGMA journal_mode=WAL")
        holder.execute("CREATE TABLE older (x)")
        holder.commit()
        for path in store_files(data):
            path.chmod(0o644)
        env = clean_env(HERMES_DATA_DIR=str(data))
        async with trio.open_nursery() as nursery:
            served = await start_serve(
                nursery, env, tmp_path, args=["--demo"], preexec_fn=loose_umask
            )
            modes = [mode(path) for path in store_files(data)]
            nursery.cancel_scope.cancel()
    finally:
        holder.close()
    assert mode(data) == 0o700
    assert modes == [0o600, 0o600, 0o600]
    said = [line for line in served.output if "made private" in line]
    assert len(said) == 1, served.output
    assert f"{data} (0755 -> 0700)" in said[0]
    for path in store_files(data):
        assert f"{path} (0644 -> 0600)" in said[0]


def test_a_shared_sticky_directory_is_left_as_it_is(tmp_path: Path) -> None:
    from hermes_trio.private_files import private_dir
    from hermes_trio.store.private import install_secret

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert private_dir(shared) == []
    assert mode(shared) == 0o1777
    secret, changed = install_secret(shared)
    assert len(secret) == 32 and changed == []
    assert mode(shared / SECRET_FILENAME) == 0o600


def test_the_install_secret_is_made_once_and_kept(tmp_path: Path) -> None:
    from hermes_trio.store.private import install_secret

    first, _ = install_secret(tmp_path / "d")
    again, _ = install_secret(tmp_path / "d")
    assert first == again
    (tmp_path / "d" / SECRET_FILENAME).write_text("not hex")
    with pytest.raises(OSError, match="not a secret"):
        install_secret(tmp_path / "d")
