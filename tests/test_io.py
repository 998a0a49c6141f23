"""Atomic writes: a failure leaves the old file (or nothing), never a partial one."""

from __future__ import annotations

import errno

import pytest

from ictrepro import io


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "a" / "f.json"
    io.atomic_write_json(path, {"x": 1})
    io.atomic_write_json(path, {"x": 2})
    assert path.read_text() == '{\n  "x": 2\n}\n'
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]


def test_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    io.atomic_write_text(path, "old")

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        io.atomic_write_text(path, "new" * 1000)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_failed_directory_build_leaves_the_old_directory(tmp_path):
    target = tmp_path / "model"
    with io.atomic_directory(target) as tmp:
        (tmp / "w.bin").write_bytes(b"v1")
    with pytest.raises(RuntimeError), io.atomic_directory(target) as tmp:
        (tmp / "w.bin").write_bytes(b"half")
        raise RuntimeError("interrupted")
    assert (target / "w.bin").read_bytes() == b"v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with io.atomic_directory(target) as tmp:
        (tmp / "w.bin").write_bytes(b"v2")
    assert (target / "w.bin").read_bytes() == b"v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_read_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(ValueError, match=rf"{path.name}:3: not valid JSON"):
        io.read_jsonl(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=":1: expected a JSON object"):
        io.read_jsonl(path)


def test_hashes(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_text("b")
    (tmp_path / "a.txt").write_text("a")
    hashes = io.hash_outputs(tmp_path, ["a.txt", "d"])
    assert list(hashes) == ["a.txt", "d/b.txt"]
    assert hashes["a.txt"] == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    assert io.sha256_json({"b": 1, "a": 2}) == io.sha256_json({"a": 2, "b": 1})
