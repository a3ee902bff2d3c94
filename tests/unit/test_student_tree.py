"""The bounds of `student_tree` (the one reader of trees students control): depth, names,
sizes, and what the top itself may be."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from autograder.core import student_tree
from autograder.core.student_tree import copy_tree, git_mode_refusal, walk


def test_a_deep_tree_is_cut_at_max_depth_and_says_so(tmp_path):
    folder = tmp_path / "top"
    deep = folder.joinpath(*["d"] * (student_tree.MAX_DEPTH + 5))
    deep.mkdir(parents=True)
    (deep / "x.ipynb").write_text("{}")
    (folder / "kept.ipynb").write_text("{}")
    tree = walk(folder)
    assert tree.files == [PurePosixPath("kept.ipynb")]
    (refusal,) = tree.refused
    assert len(refusal.path.parts) == student_tree.MAX_DEPTH + 2  # top, then the folders
    assert "folders deep" in refusal.reason


def test_past_max_entries_the_rest_is_left_out_once(tmp_path, monkeypatch):
    monkeypatch.setattr(student_tree, "MAX_ENTRIES", 5)
    folder = tmp_path / "top"
    for sub in ("a", "b"):
        (folder / sub).mkdir(parents=True)
        for number in range(4):
            (folder / sub / f"{number}.txt").write_text("x")
    tree = walk(folder)
    assert len(tree.files) + len(tree.folders) == 5
    assert [r.reason for r in tree.refused] == ["more than 5 names: the rest is left out"]


def test_copy_bounds_each_file_and_the_whole_tree(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "small.txt").write_text("x" * 10)
    (source / "large.txt").write_text("x" * 100)
    tree = copy_tree(source, tmp_path / "one", max_file_bytes=50)
    assert tree.files == [PurePosixPath("small.txt")]
    assert [str(r) for r in tree.refused] == ["source/large.txt (larger than 50 bytes)"]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["small.txt"]
    tree = copy_tree(source, tmp_path / "all", max_total_bytes=50)
    assert [str(r) for r in tree.refused] == ["source (larger than 50 bytes in all)"]
    assert not (tmp_path / "all").exists(), "nothing of a refused tree is kept"


def test_the_top_must_be_a_folder_and_is_followed_only_when_asked(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert [r.reason for r in walk(tmp_path / "file").refused] == ["not a folder"]
    assert [r.reason for r in walk(tmp_path / "link").refused] == ["a symbolic link"]
    assert walk(tmp_path / "link", follow_top=True).files == [PurePosixPath("a.txt")]
    assert not copy_tree(tmp_path / "link", tmp_path / "copy").files
    assert not Path(tmp_path / "copy").exists(), "no folder is made for a refused top"


def test_git_modes():
    assert git_mode_refusal("100644") is None and git_mode_refusal("100755") is None
    assert git_mode_refusal("120000") == "a symbolic link"
    assert "submodule" in git_mode_refusal("160000")
    assert git_mode_refusal("040000") == "a folder"
    assert "git mode 100664" in git_mode_refusal("100664")
