"""Symbolic links in recipe trees: one rule for the disk reader and the git reader.
Links inside the tree are followed; links that leave it (or loop, or lead to a
directory, or to nothing under a recipe name) are errors naming the link, and
what they point at is never read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.diff.gitsource import Repository
from matrixgen.engine.load import TreeListing, disk_lookup, plan_reads, read_directory
from matrixgen.model.errors import ConfigError, QuarantineError, RecipeError
from matrixgen.util.treelinks import Kind, resolve
from tests.gitrepo import GitRepo

RECIPE = "type: basic\nformat_version: 1\nspec: {model: gpt}\nproducts: []\n"
SECRET = "token: s3cr3t-do-not-print\n"


def make_tree(top: Path) -> Path:
    root = top / "recipes"
    (root / "sub").mkdir(parents=True)
    (root / "real.yaml").write_text(RECIPE)
    (root / "sub" / "notes.txt").write_text("a folder git keeps\n")
    (top / "secret.yaml").write_text(SECRET)
    return root


def read_both(top: Path, repo: GitRepo | None) -> tuple[object, object]:
    """What the disk reader and the git reader (of the same tree, committed) do."""

    def attempt(read: Callable[[], dict[str, bytes]]) -> object:
        try:
            return {k: v for k, v in sorted(read().items())}
        except (RecipeError, QuarantineError, ConfigError) as exc:
            return (
                type(exc).__name__,
                sorted((f.location.file.rsplit("recipes/", 1)[-1], f.code) for f in exc.findings),
            )

    disk = attempt(lambda: read_directory(top / "recipes"))
    if repo is None:
        return disk, None
    repo.commit()
    git = attempt(lambda: dict(Repository(repo.top).read_revision("HEAD", "recipes").files))
    return disk, git


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


CASES = {
    # name: (link path in the tree, link target, expected outcome)
    "inside": ("link.yaml", "real.yaml", "read"),
    "inside-from-a-subfolder": ("sub/link.yaml", "../real.yaml", "read"),
    "through-another-link": ("b.yaml", "link2.yaml", "read"),
    "outside-relative": ("out.yaml", "../secret.yaml", "tree-link"),
    "outside-absolute": ("abs.yaml", "{top}/secret.yaml", "tree-link"),
    "outside-through-a-folder": ("sub/out.yaml", "../../secret.yaml", "tree-link"),
    "outside-any-name": ("notes.txt", "../secret.yaml", "tree-link"),
    "dev-null": ("null.yaml", "/dev/null", "tree-link"),
    "dangling": ("gone.yaml", "nowhere.yaml", "tree-link"),
    "dangling-other-name": ("gone.txt", "nowhere.txt", "ignored"),
    "directory": ("dirlink", "sub", "tree-link"),
    "loop": ("loop.yaml", "loop.yaml", "tree-link"),
    "through-a-file": ("bad.yaml", "real.yaml/x.yaml", "tree-link"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_disk_and_git_follow_one_rule(repo: GitRepo, case: str) -> None:
    rel, target, expected = CASES[case]
    top = repo.top
    root = make_tree(top)
    if case == "through-another-link":
        (root / "link2.yaml").symlink_to("real.yaml")
    (root / rel).symlink_to(target.format(top=top))
    disk, git = read_both(top, repo)
    assert disk == git, (disk, git)
    if expected == "read":
        assert isinstance(disk, dict) and disk[rel] == RECIPE.encode()
    elif expected == "ignored":
        assert isinstance(disk, dict) and rel not in disk and "real.yaml" in disk
    else:
        assert disk == ("RecipeError", [(rel, expected)])


def test_the_message_names_the_link_and_never_what_it_points_at(
    tmp_path: Path, cli: Callable
) -> None:
    root = make_tree(tmp_path)
    (root / "sub" / "leak.yaml").symlink_to("../../secret.yaml")
    for command in (["validate"], ["list"], ["generate", "--out", tmp_path / "out"]):
        run = cli(*command, "--recipes", root)
        assert run.code == 1, run
        assert f"{root}/sub/leak.yaml: error: a symbolic link to '../../secret.yaml'" in run.err
        assert "leaves the recipe tree" in run.err and "s3cr3t" not in run.err + run.out
    assert not (tmp_path / "out").exists()


def test_a_quarantine_file_linked_out_of_a_git_tree_is_refused(
    repo: GitRepo, cli: Callable
) -> None:
    root = make_tree(repo.top)
    (root / "quarantine.yaml").symlink_to("/dev/null")
    disk, git = read_both(repo.top, repo)
    assert disk == git == ("QuarantineError", [("quarantine.yaml", "tree-link")])


def test_a_quarantine_directory_in_a_git_tree_is_refused(repo: GitRepo) -> None:
    root = make_tree(repo.top)
    (root / "quarantine.yaml").mkdir()
    (root / "quarantine.yaml" / "entries.yaml").write_text("entries: []\n")
    disk, git = read_both(repo.top, repo)
    assert disk == git == ("QuarantineError", [("quarantine.yaml", "tree-file-kind")])


def test_a_config_that_is_a_directory_is_a_config_error(tmp_path: Path, cli: Callable) -> None:
    root = make_tree(tmp_path)
    (root / "matrixgen.yaml").mkdir()
    (root / "matrixgen.yaml" / "x.yaml").write_text(RECIPE)
    run = cli("validate", "--recipes", root)
    assert run.code == 3 and "matrixgen.yaml: error: a directory, not a file" in run.err


# --------------------------------------------------------------------------- the resolver


NAMES = st.sampled_from(["a", "b", "c.yaml", "d"])


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """Entries (kind, path, link target) of a small tree with links anywhere."""
    entries: list[tuple[str, str, str]] = []
    paths: set[str] = set()
    for _ in range(draw(st.integers(1, 10))):
        depth = draw(st.integers(0, 2))
        parts = [draw(NAMES) for _ in range(depth + 1)]
        path = "/".join(parts)
        if any(path == p or path.startswith(p + "/") or p.startswith(path + "/") for p in paths):
            continue
        kind = draw(st.sampled_from(["file", "link"]))
        target = ""
        if kind == "link":
            ups = draw(st.integers(0, 3))
            target = "/".join([".."] * ups + [draw(NAMES) for _ in range(draw(st.integers(1, 2)))])
            if draw(st.booleans()) and not ups:
                target = "/" + target
        paths.add(path)
        entries.append((kind, path, target))
    return entries


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entries=trees())
def test_what_the_resolver_follows_is_what_the_os_would_read_inside_the_tree(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, str, str]]
) -> None:
    base = tmp_path_factory.mktemp("links")
    root = base / "t" / "root"
    root.mkdir(parents=True)
    for kind, path, target in entries:
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            full.write_text(path)
        else:
            full.symlink_to(target)
    real_root = os.path.realpath(root)
    lookup = disk_lookup(root)
    for _, path, _ in entries:
        found = resolve(path, lookup)
        if found.kind in (Kind.FILE, Kind.DIRECTORY):
            # Followed: the OS reaches the same place, and it is inside the tree.
            assert found.path is not None
            assert os.path.realpath(root / path) == os.path.realpath(root / found.path)
            assert os.path.commonpath([real_root, os.path.realpath(root / found.path)]) == real_root
        if found.kind is Kind.FILE:
            assert (root / path).read_text() == found.path
        if found.kind is Kind.OUTSIDE:
            assert found.path is None


def test_the_resolver_stays_in_the_tree_for_a_listing() -> None:
    listing = TreeListing(
        files=frozenset({"a.yaml"}),
        links={"up.yaml": "../a.yaml", "in.yaml": "./sub/../a.yaml", "x.yaml": "/etc/passwd"},
        directories=frozenset({"sub"}),
    )
    assert resolve("in.yaml", listing.lookup).path == "a.yaml"
    assert resolve("up.yaml", listing.lookup).kind is Kind.OUTSIDE
    assert resolve("x.yaml", listing.lookup).kind is Kind.OUTSIDE
    with pytest.raises(RecipeError) as caught:
        plan_reads(listing, root="r")
    assert [f.location.file for f in caught.value.findings] == ["r/up.yaml", "r/x.yaml"]
