"""Atomic file writes, hashing and JSON Lines I/O shared by every stage.

A stage never leaves a half-written file that a later stage would trust: every file is
written to a temporary sibling, flushed to disk, and renamed over its target (``os.replace``
is atomic on POSIX within one file system). Directories such as a saved model are built in
a temporary sibling directory and swapped in the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ictrepro.errors import DataError


def _fsync_dir(path: Path) -> None:
    # Makes the rename itself durable; not every file system supports it, hence the guard.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: readers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> None:
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read JSON Lines; a malformed line raises ``ValueError`` naming file and line number."""
    return [record for _, record in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-blank line, so later checks can name the line
    too; a malformed line raises ``ValueError`` naming file and line number."""
    path = Path(path)
    records = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object per line")
            records.append((lineno, record))
    return records


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory in a temporary sibling and swap it into ``path`` on success.

    On an exception the temporary directory is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                with file.open("rb") as f:
                    os.fsync(f.fileno())
        if path.exists():
            # Two renames are not one atomic step, but at every moment either the old or
            # the complete new directory exists under a name a reader can recognise.
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256_file(path: str | os.PathLike, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_json(obj: Any) -> str:
    """Hash of a JSON-able object in canonical form (sorted keys, no whitespace)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_outputs(root: str | os.PathLike, relpaths: Iterable[str]) -> dict[str, str]:
    """``{relpath: sha256}`` for files, expanding directories into their files (sorted)."""
    root = Path(root)
    hashes: dict[str, str] = {}
    for rel in relpaths:
        target = root / rel
        files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
        for file in files:
            hashes[file.relative_to(root).as_posix()] = sha256_file(file)
    return hashes
