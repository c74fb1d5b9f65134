"""utils/files.py and utils/archives.py: atomic writes keep the old file on failure; unsafe archives are refused whole (R14)."""

import io
import os
import tarfile
import zipfile

import pytest

from keras_bert_zoo.utils import archives, files


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "a.json"
    files.atomic_write_json(path, {"v": 1})
    with pytest.raises(RuntimeError):
        with files.atomic_path(path) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise RuntimeError("killed mid-write")
    assert files.read_json(path) == {"v": 1}
    assert os.listdir(tmp_path) == ["a.json"]  # temp file cleaned


def test_atomic_directory_restores_old_directory_on_failure(tmp_path):
    target = tmp_path / "preset"
    with files.atomic_directory(target) as tmp:
        (open(os.path.join(tmp, "x"), "w")).write("old")
    with pytest.raises(RuntimeError):
        with files.atomic_directory(target) as tmp:
            (open(os.path.join(tmp, "x"), "w")).write("new")
            raise RuntimeError("failure")
    assert (target / "x").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["preset"]


def test_sha256_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert files.sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            if isinstance(data, zipfile.ZipInfo):
                zf.writestr(data, name)
            else:
                zf.writestr(name, data)
    return path


def _symlink_info(name):
    info = zipfile.ZipInfo(name)
    info.external_attr = (0o120777 << 16)
    return info


@pytest.mark.parametrize(
    "members, needle",
    [
        ([("ok.txt", b"x"), ("../evil.txt", b"x")], "'..'"),
        ([("ok.txt", b"x"), ("/tmp/evil_abs.txt", b"x")], "absolute path"),
        ([("ok.txt", b"x"), ("link", _symlink_info("link"))], "symbolic link"),
    ],
)
def test_unsafe_zip_refused_whole(tmp_path, members, needle):
    if isinstance(members[-1][1], zipfile.ZipInfo):
        members = [members[0], ("/etc/passwd", members[-1][1])]  # a link whose target is outside
    archive = _zip(tmp_path / "a.zip", members)
    target = tmp_path / "out" / "x"
    with pytest.raises(ValueError, match=needle):
        archives.safe_extract(archive, target)
    assert not target.exists() and not (tmp_path / "out" / "evil.txt").exists()
    assert not os.path.exists("/tmp/evil_abs.txt")
    assert os.listdir(tmp_path / "out") == []


def _tar(path, build):
    with tarfile.open(path, "w:gz") as tf:
        data = b"x"
        info = tarfile.TarInfo("ok.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        build(tf)
    return path


def _tar_link(kind, name, target):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    "member, needle",
    [
        (_tar_link(tarfile.SYMTYPE, "link", "../../outside"), "symbolic link"),
        (_tar_link(tarfile.LNKTYPE, "hard", "/etc/passwd"), "hard link|absolute"),
        (_tar_link(tarfile.SYMTYPE, "abs", "/etc/passwd"), "symbolic link"),
    ],
)
def test_unsafe_tar_refused_whole(tmp_path, member, needle):
    archive = _tar(tmp_path / "a.tar.gz", lambda tf: tf.addfile(member))
    target = tmp_path / "out"
    with pytest.raises(ValueError, match=needle):
        archives.safe_extract(archive, target)
    assert not target.exists()


def test_safe_archives_extract(tmp_path):
    archive = _zip(tmp_path / "a.zip", [("dir/a.txt", b"A"), ("b.txt", b"B")])
    archives.safe_extract(archive, tmp_path / "z")
    assert (tmp_path / "z" / "dir" / "a.txt").read_bytes() == b"A"
    inside = _tar(tmp_path / "b.tar.gz", lambda tf: tf.addfile(_tar_link(tarfile.SYMTYPE, "l", "ok.txt")))
    archives.safe_extract(inside, tmp_path / "t")
    assert (tmp_path / "t" / "l").read_bytes() == b"x"
    with pytest.raises(ValueError, match="neither a zip nor a tar"):
        archives.safe_extract(tmp_path / "z" / "b.txt", tmp_path / "n")
