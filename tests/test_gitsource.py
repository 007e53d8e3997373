"""Reading recipe trees from git revisions without a checkout, safely."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from matrixgen.diff import gitsource
from matrixgen.diff.gitsource import Repository, blob_id, check_revision, locate_recipes
from matrixgen.model.errors import ExitCode, GitError, RecipeError, UsageError
from matrixgen.util import pipes
from tests.gitrepo import GitRepo

RECIPE = "type: basic\nformat_version: 1\nspec: {model: gpt}\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The arguments of every git command gitsource runs (still run for real)."""
    calls: list[list[str]] = []
    real = gitsource._run_git

    def spy(args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(list(args))
        return real(args, **kwargs)

    monkeypatch.setattr(gitsource, "_run_git", spy)
    return calls


def test_reads_a_revision_with_git_blob_ids(repo: GitRepo) -> None:
    repo.commit({"a.yaml": RECIPE, "sub/b.yml": "x: 1\n", "notes.txt": "not a recipe\n"})
    source = Repository(repo.top).read_revision("HEAD", "recipes")
    assert source.present
    assert sorted(source.files) == ["a.yaml", "sub/b.yml"]  # only YAML files
    assert source.files["a.yaml"] == RECIPE.encode()
    for rel in source.files:
        assert source.blob_ids[rel] == repo.git("rev-parse", f"HEAD:recipes/{rel}")
    assert source.commit == repo.git("rev-parse", "HEAD")
    assert source.ref == source.commit and source.label == source.commit[:12]


def test_reads_an_older_revision_while_the_worktree_is_dirty(repo: GitRepo) -> None:
    first = repo.commit({"a.yaml": "one: 1\n"})
    repo.commit({"a.yaml": "two: 2\n", "b.yaml": "b: 1\n"})
    repo.write({"a.yaml": "three: 3\n", "c.yaml": "c: 1\n"})  # not committed
    git = Repository(repo.top)
    old = git.read_revision(first, "recipes")
    assert old.files == {"a.yaml": b"one: 1\n"}
    head = git.read_revision("HEAD", "recipes")
    assert head.files == {"a.yaml": b"two: 2\n", "b.yaml": b"b: 1\n"}
    worktree = git.read(None, "recipes")
    assert worktree.ref == "worktree" and worktree.commit is None
    assert worktree.files == {"a.yaml": b"three: 3\n", "b.yaml": b"b: 1\n", "c.yaml": b"c: 1\n"}
    # Nothing was checked out or staged.
    assert (repo.top / "recipes" / "a.yaml").read_text() == "three: 3\n"
    assert repo.git("diff", "--cached", "--name-only") == ""


def test_worktree_blob_ids_are_the_ids_git_gives(repo: GitRepo) -> None:
    repo.commit({"a.yaml": RECIPE})
    source = Repository(repo.top).read_worktree("recipes")
    assert source.blob_ids["a.yaml"] == repo.git("hash-object", "recipes/a.yaml")
    assert blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's empty blob
    # Unchanged files have the same id on both sides: what the diff's cache relies on.
    assert source.blob_ids == Repository(repo.top).read_revision("HEAD", "recipes").blob_ids


def test_a_directory_absent_at_a_revision_is_an_empty_tree(repo: GitRepo) -> None:
    repo.write({"other.txt": "x\n"}, under="")
    first = repo.commit(message="no recipes yet")
    repo.commit({"a.yaml": RECIPE})
    source = Repository(repo.top).read_revision(first, "recipes")
    assert not source.present and source.files == {} and source.blob_ids == {}
    repo.write({"": None})  # remove recipes/ from the working tree
    assert not Repository(repo.top).read_worktree("recipes").present


def test_a_file_where_the_directory_should_be_is_an_error(repo: GitRepo) -> None:
    repo.write({"recipes": "not a directory\n"}, under="")
    repo.commit()
    with pytest.raises(GitError, match='"recipes" is a file, not a directory'):
        Repository(repo.top).read_revision("HEAD", "recipes")
    with pytest.raises(GitError, match="not a directory, in the working tree"):
        Repository(repo.top).read_worktree("recipes")


def test_unknown_revision_is_a_git_error_with_a_suggestion(repo: GitRepo) -> None:
    repo.commit({"a.yaml": RECIPE})
    with pytest.raises(GitError) as info:
        Repository(repo.top).resolve("mian")
    assert info.value.exit_code is ExitCode.GIT
    assert 'unknown revision "mian"' in str(info.value)
    assert 'did you mean "main"' in str(info.value)


def test_a_repository_without_commits_says_so(repo: GitRepo) -> None:
    repo.write({"a.yaml": RECIPE})  # nothing committed yet
    with pytest.raises(GitError) as info:
        Repository(repo.top).resolve("HEAD")
    message = str(info.value)
    assert info.value.exit_code is ExitCode.GIT
    assert "has no commits yet" in message
    assert "did you mean" not in message  # never "HEAD (did you mean HEAD?)"


def test_a_name_that_resolves_to_nothing_is_not_suggested_back(repo: GitRepo) -> None:
    repo.commit({"a.yaml": RECIPE})
    repo.git("checkout", "-q", "--orphan", "fresh")  # HEAD names an unborn branch
    with pytest.raises(GitError) as info:
        Repository(repo.top).resolve("HEAD")
    assert 'unknown revision "HEAD"' in str(info.value)
    assert 'did you mean "HEAD"' not in str(info.value)
    assert "no commits yet" not in str(info.value)  # main has one


def test_a_blob_is_not_a_commit(repo: GitRepo) -> None:
    repo.commit({"a.yaml": RECIPE})
    blob = repo.git("rev-parse", "HEAD:recipes/a.yaml")
    with pytest.raises(GitError, match="unknown revision"):
        Repository(repo.top).resolve(blob)


@pytest.mark.parametrize(
    "revision", ["-x", "--output=/tmp/owned", "--end-of-options", "-", "", "  ", "a\nb"]
)
def test_revisions_git_could_read_as_options_are_refused(revision: str) -> None:
    with pytest.raises(UsageError) as info:
        check_revision(revision)
    assert info.value.exit_code is ExitCode.USAGE


def test_user_strings_reach_git_only_after_end_of_options(
    repo: GitRepo, git_calls: list[list[str]], tmp_path: Path
) -> None:
    repo.commit({"a.yaml": RECIPE})
    git = Repository(repo.top)
    given = "main~0"
    git.read_revision(given, "recipes")
    for args in git_calls:
        for i, arg in enumerate(args):
            if given in arg:
                assert "--end-of-options" in args[:i], args
    # Something that would be an option anywhere else never gets to git.
    git_calls.clear()
    marker = tmp_path / "owned"
    with pytest.raises(UsageError):
        git.read_revision(f"--output={marker}", "recipes")
    assert git_calls == [] and not marker.exists()


def test_all_blobs_of_a_tree_come_from_one_cat_file_process(
    repo: GitRepo, git_calls: list[list[str]]
) -> None:
    repo.commit({f"d{i % 7}/f{i}.yaml": f"n: {i}\n" for i in range(300)})
    source = Repository(repo.top).read_revision("HEAD", "recipes")
    assert len(source.files) == 300
    assert source.files["d3/f10.yaml"] == b"n: 10\n"
    assert sum(1 for args in git_calls if args[:1] == ["cat-file"] and "--batch" in args) == 1


def test_empty_and_binary_files_survive_the_batch_reader(repo: GitRepo) -> None:
    data = bytes(range(256)) + b"\n\n"
    repo.commit({"empty.yaml": "", "bin.yaml": data, "z.yaml": "z: 1\n"})
    source = Repository(repo.top).read_revision("HEAD", "recipes")
    assert source.files == {"bin.yaml": data, "empty.yaml": b"", "z.yaml": b"z: 1\n"}


def test_symlinks_inside_the_tree_read_as_their_target(repo: GitRepo) -> None:
    repo.commit({"real.yaml": RECIPE})
    (repo.top / "recipes" / "link.yaml").symlink_to("real.yaml")
    (repo.top / "recipes" / "sub").mkdir()
    (repo.top / "recipes" / "sub" / "up.yaml").symlink_to("../real.yaml")
    repo.commit()
    source = Repository(repo.top).read_revision("HEAD", "recipes")
    assert source.files["link.yaml"] == RECIPE.encode()
    assert source.blob_ids["link.yaml"] == source.blob_ids["real.yaml"]
    assert source.files["sub/up.yaml"] == RECIPE.encode()


def test_a_link_leaving_the_tree_is_an_error_naming_it(repo: GitRepo) -> None:
    repo.commit({"real.yaml": RECIPE})
    (repo.top / "outside.yaml").write_text("o: secret\n")
    (repo.top / "recipes" / "out.yaml").symlink_to("../outside.yaml")
    commit = repo.commit()
    with pytest.raises(RecipeError) as caught:
        Repository(repo.top).read_revision("HEAD", "recipes")
    assert [str(f.location) for f in caught.value.findings] == ["recipes/out.yaml"]
    assert "leaves the recipe tree" in str(caught.value) and "secret" not in str(caught.value)
    assert "at HEAD" in caught.value.message and caught.value.exit_code == 1 and commit


def test_the_repository_top_as_the_tree(repo: GitRepo) -> None:
    repo.write({"a.yaml": RECIPE}, under="")
    repo.commit()
    source = Repository(repo.top).read_revision("HEAD", "")
    assert source.files == {"a.yaml": RECIPE.encode()}


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="not inside a git repository"):
        Repository.discover(tmp_path)


def test_locate_recipes(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit({"a.yaml": RECIPE})
    (repo.top / "src").mkdir()
    top = repo.top.resolve()
    found, path = locate_recipes(None, repo.top / "src")
    assert found.top.resolve() == top and path == "recipes"
    # Relative to the current directory, like any path on the command line.
    _, path = locate_recipes(Path("../recipes"), repo.top / "src")
    assert path == "recipes"
    # A directory that exists only at some revision is still located.
    _, path = locate_recipes(Path("old/recipes"), repo.top)
    assert path == "old/recipes"
    _, path = locate_recipes(Path("."), repo.top)
    assert path == ""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises((UsageError, GitError)):
        locate_recipes(outside, repo.top)


def test_locate_recipes_of_a_megatron_checkout(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No recipes/ at the top, Megatron-LM's tests/test_utils/recipes/ instead.
    (repo.top / "tests/test_utils/recipes").mkdir(parents=True)
    _, path = locate_recipes(None, repo.top)
    assert path == "tests/test_utils/recipes"
    (repo.top / "recipes").mkdir()
    assert locate_recipes(None, repo.top)[1] == "recipes"
    # $MATRIXGEN_RECIPES, relative to the current directory like --recipes.
    monkeypatch.setenv("MATRIXGEN_RECIPES", "tests/test_utils/recipes")
    assert locate_recipes(None, repo.top)[1] == "tests/test_utils/recipes"
    assert locate_recipes(Path("recipes"), repo.top)[1] == "recipes"  # the flag wins


def test_git_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def missing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", missing)
    with pytest.raises(GitError, match="git is not installed"):
        Repository.discover(tmp_path)


def test_small_blobs_reads_only_what_fits_and_says_what_is_not_there(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = b"x" * 5000
    commit = repo.commit({"small.json": "{}\n", "big.json": big.decode(), "sub/c.yaml": "a: 1\n"})
    git = Repository(repo.top)
    small_id = blob_id(b"{}\n")
    names = [small_id, f"{commit}:recipes/big.json", f"{commit}:recipes/sub/c.yaml"]
    names += [f"{commit}:recipes/none.json", "0" * 40, f"{commit}:recipes/a\nb"]

    def check(found: dict) -> None:
        assert found[small_id] == (small_id, 3, b"{}\n")
        assert found[f"{commit}:recipes/big.json"] == (blob_id(big), 5000, None)  # never read
        assert found[f"{commit}:recipes/sub/c.yaml"][2] == b"a: 1\n"
        assert found[f"{commit}:recipes/none.json"] is None and found["0" * 40] is None
        assert found[f"{commit}:recipes/a\nb"] is None  # a name git cannot be asked for

    check(git.small_blobs(names, 4096))
    assert blob_id(big) not in git._blobs
    # Each name read is handed over once, its blob in the order its first name
    # is asked (a blob two names share, to both at once); none too large or missing.
    twice = [f"{commit}:recipes/sub/c.yaml", *names, blob_id(b"a: 1\n")]
    given: list[tuple[str, bytes]] = []
    check(Repository(repo.top).small_blobs(twice, 4096, lambda n, b: given.append((n, b))))
    read = [(f"{commit}:recipes/sub/c.yaml", b"a: 1\n"), (blob_id(b"a: 1\n"), b"a: 1\n")]
    assert given == [*read, (small_id, b"{}\n")]
    # A git before 2.36 has no --batch-command: the same from two processes.
    monkeypatch.setattr(Repository, "_batch_command", lambda self, names, limit, each: None)
    check(Repository(repo.top).small_blobs(names, 4096))
    given.clear()
    Repository(repo.top).small_blobs(twice, 4096, lambda n, b: given.append((n, b)))
    assert sorted(given) == sorted([read[0], (small_id, b"{}\n"), read[1]])


def test_changed_files_come_from_the_tree_diff_and_the_working_tree(repo: GitRepo) -> None:
    repo.commit({"a.json": "1", "b.json": "2", "c.json": "3"})
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"a.json": "10", "b.json": None, "d.json": "4"})
    git = Repository(repo.top)
    changes = {
        c.path: c.status for c in git.changed_files(base, repo.git("rev-parse", "HEAD"), "recipes")
    }
    assert changes == {"recipes/a.json": "M", "recipes/b.json": "D", "recipes/d.json": "A"}
    repo.write({"c.json": "30", "e.json": "5"})  # e.json: untracked
    (repo.top / "recipes" / "a.json").unlink()
    changes = {c.path: c.status for c in git.changed_files(base, None, "recipes")}
    assert changes == {
        "recipes/a.json": "D",
        "recipes/b.json": "D",
        "recipes/c.json": "M",
        "recipes/d.json": "A",
        "recipes/e.json": "A",
    }
    assert git.changed_files(base, None, "recipes/[bc].json") == []  # a path, not a pattern


def test_a_git_without_batch_command_is_asked_twice_whatever_the_commands_size(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git before 2.36 exits at --batch-command without reading a byte:
    whether the commands went into the pipe at once or from a thread, and
    whether git was gone when they were written, the sizes and blobs come from
    --batch-check and --batch."""
    import os
    import shutil

    commit = repo.commit({f"f{i}.json": f"{i}\n" for i in range(1500)})
    real = shutil.which("git")
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--batch-command*) echo "unknown option" >&2; exit 129;; esac\n'
        f'exec "{real}" "$@"\n'
    )
    fake.chmod(0o755)
    few = [f"{commit}:recipes/f1.json"]
    many = [f"{commit}:recipes/f{i}.json" for i in range(1500)]  # past a 64 KiB pipe's room
    # More commands and answers than a pipe holds, each way.
    spelled = [
        f"{rev}:recipes/f{i}.json" for i in range(1500) for rev in (commit, "HEAD", "HEAD~0")
    ]
    assert len(Repository(repo.top).small_blobs(spelled, 4096)) == 4500
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    for names in (few, many):
        found = Repository(repo.top).small_blobs(names, 4096)
        assert found[f"{commit}:recipes/f1.json"] == (blob_id(b"1\n"), 2, b"1\n")
        assert len({v for v in found.values() if v is not None}) == len(set(names))


def test_a_childs_stdin_closes_quietly_when_the_child_is_gone() -> None:
    import os

    read, write = os.pipe()
    os.close(read)  # the child exited without reading
    pipe = os.fdopen(write, "wb")
    try:
        pipe.write(b"info x\n")  # buffered: written at close
        pipes.close_quietly(pipe)
        assert pipe.closed
    finally:
        if not pipe.closed:
            os.close(write)


def test_changed_trees_come_from_the_same_diff_and_name_their_files(repo: GitRepo) -> None:
    repo.commit({"a/x.json": "1", "a/model_config.yaml": "M: 1\n", "b/y.json": "2"})
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"a/x.json": "10", "b/y.json": None, "c/z.json": "3"})
    head = repo.git("rev-parse", "HEAD")
    git = Repository(repo.top)
    trees: dict[str, tuple[str | None, str | None]] = {}
    files = git.changed_files(base, head, "recipes", trees)
    assert [c.path for c in files] == [c.path for c in git.changed_files(base, head, "recipes")]
    assert set(trees) == {"recipes", "recipes/a", "recipes/b", "recipes/c"}
    assert trees["recipes/b"][1] is None and trees["recipes/c"][0] is None
    for side, commit in ((0, base), (1, head)):
        assert trees["recipes/a"][side] == repo.git("rev-parse", f"{commit}:recipes/a")
    by_tree = git.small_blobs([f"{trees['recipes/a'][1]}:model_config.yaml"], 4096)
    assert by_tree[f"{trees['recipes/a'][1]}:model_config.yaml"][2] == b"M: 1\n"
