"""Read a recipe tree from a git revision without a checkout.

`matrixgen diff` compares two revisions of a tree in a dirty working copy or a CI
clone, so nothing here touches the index, HEAD or the working tree: the listing
comes from `git ls-tree -r -z` and the contents from one `git cat-file --batch`
process per tree. The working tree itself is read from disk.

Every file comes with its git blob id (for the working tree, the id git would
give it), so parsed and expanded results can be reused by content.

Safety: a revision string is never handed to git where it could be read as an
option. Strings starting with `-` are refused, and the rest go after
`--end-of-options` into `git rev-parse --verify --quiet REV^{commit}`; every
later git call names the resolved commit id (hex digits) only.

A recipe directory that does not exist at a revision is an empty tree there
(`TreeSource.present` is False, and the caller says so); a path that is a file
there is an error.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

from msgspec import Struct, field

from matrixgen.model.errors import GitError, UsageError, did_you_mean
from matrixgen.util.checkout import RECIPES_VARIABLE, recipes_in, tree_path
from matrixgen.util.pipes import close_quietly, write_async

WORKTREE = "worktree"
# git never prompts for a password and takes no optional lock for us.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
_NO_GIT = "git is not installed (or not on PATH); matrixgen diff needs it"

# Modes of `git ls-tree` entries.
_MODE_FILES = frozenset({"100644", "100755"})
_MODE_SYMLINK = "120000"
_MODE_TREE = "040000"


class TreeSource(Struct, frozen=True, kw_only=True):
    """One side of a diff: the files of a recipe tree at a revision."""

    revision: str  # as the user gave it, or "worktree"
    commit: str | None  # full commit id; None for the working tree
    path: str  # the tree's directory relative to the repository top ("" = the top)
    files: Mapping[str, bytes] = field(default_factory=dict)
    blob_ids: Mapping[str, str] = field(default_factory=dict)
    present: bool = True  # False: the directory does not exist at this revision

    @property
    def ref(self) -> str:
        """The full commit id, or "worktree"."""
        return self.commit or WORKTREE

    @property
    def label(self) -> str:
        """How messages name this side: a short commit id, or "worktree"."""
        return self.commit[:12] if self.commit else WORKTREE


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """The id git gives a blob with these bytes (`git hash-object`)."""
    digest = hashlib.new(object_format)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def check_revision(revision: str) -> None:
    """Refuse revision strings git could read as something other than a revision."""
    if not revision or not revision.strip():
        raise UsageError("a revision must not be empty")
    if revision.startswith("-"):
        raise UsageError(
            f'revision "{revision}" starts with "-": refused, git would read it as an option'
        )
    if any(ch in revision for ch in "\0\n\r"):
        raise UsageError(f"revision {revision!r} contains a control character")


class Repository:
    """A git repository with a working tree, found from a directory inside it."""

    def __init__(self, top: Path) -> None:
        self.top = top
        # Blob contents by id, read from git or the working tree: a file that two
        # sides hold unchanged is read once.
        self._blobs: dict[str, bytes] = {}
        # Commit ids by revision: a diff asks for each revision more than once.
        self._commits: dict[str, str] = {}

    @classmethod
    def discover(cls, start: Path) -> Repository:
        """The repository that contains `start` (a directory)."""
        result = _run_git(["rev-parse", "--show-toplevel"], cwd=start)
        top = result.stdout.decode("utf-8", "replace").strip()
        if result.returncode != 0 or not top:
            raise GitError(
                f"{start} is not inside a git repository with a working tree "
                "(matrixgen diff reads revisions from git)"
            )
        return cls(Path(top))

    def git(self, args: Sequence[str], *, stdin: bytes | None = None) -> bytes:
        """Run git in this repository; a failure is a GitError with git's own words."""
        result = _run_git(args, cwd=self.top, stdin=stdin)
        if result.returncode != 0:
            words = result.stderr.decode("utf-8", "replace").strip().splitlines()
            detail = words[-1] if words else f"exit status {result.returncode}"
            raise GitError(f"git {args[0]} failed: {detail}")
        return result.stdout

    @cached_property
    def object_format(self) -> str:
        out = _run_git(["rev-parse", "--show-object-format"], cwd=self.top)
        text = out.stdout.decode().strip()
        return text if out.returncode == 0 and text else "sha1"

    def resolve(self, revision: str) -> str:
        """The full id of the commit a revision names; GitError when there is none."""
        check_revision(revision)
        if revision in self._commits:
            return self._commits[revision]
        result = _run_git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
            cwd=self.top,
        )
        commit = result.stdout.decode().strip()
        if result.returncode == 0 and commit:
            self._commits[revision] = commit
            return commit
        raise GitError(self._unknown_revision_message(revision))

    def _unknown_revision_message(self, revision: str) -> str:
        commits = _run_git(["rev-list", "-n", "1", "--all"], cwd=self.top)
        if commits.returncode != 0 or not commits.stdout.strip():  # a fresh `git init`
            return (
                f'unknown revision "{revision}": the git repository at {self.top} has no '
                "commits yet (commit the recipe tree first; the working tree is the head)"
            )
        kinds = ["refs/heads", "refs/tags", "refs/remotes"]
        listed = _run_git(["for-each-ref", "--format=%(refname:short)", *kinds], cwd=self.top)
        # The revision itself may be a known name that does not resolve to a commit
        # (HEAD of an orphan branch): never suggest it back.
        names = {*listed.stdout.decode("utf-8", "replace").split(), "HEAD"}
        refs = sorted(name for name in names if name != revision)
        message = f'unknown revision "{revision}"{did_you_mean(revision, refs)}'
        message += f" in the git repository at {self.top}"
        shallow = _run_git(["rev-parse", "--is-shallow-repository"], cwd=self.top)
        if shallow.stdout.strip() == b"true":
            message += (
                "; this clone is shallow: fetch the base first "
                "(for example `git fetch --depth=1 origin main`)"
            )
        return message

    def _object(self, revision: str, path: str) -> tuple[str, str, str]:
        """The commit a revision names, how git names `path` in it, and the
        kind of object there ("tree", "blob", ...; "" when there is none)."""
        commit = self.resolve(revision)
        spec = f"{commit}:{path}" if path else f"{commit}^{{tree}}"
        kind = _run_git(["cat-file", "-t", "--end-of-options", spec], cwd=self.top)
        return commit, spec, kind.stdout.decode().strip() if kind.returncode == 0 else ""

    def read_revision(self, revision: str, path: str) -> TreeSource:
        """The recipe tree at `path` (relative to the top) in a commit."""
        commit, spec, kind_text = self._object(revision, path)
        if not kind_text:
            return TreeSource(revision=revision, commit=commit, path=path, present=False)
        if kind_text != "tree":
            what = "file" if kind_text == "blob" else kind_text  # "commit": a submodule
            raise GitError(f'"{path}" is a {what}, not a directory, at {revision} ({commit[:12]})')
        listing = self.git(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", spec])
        files, blobs = self._read_listing(listing, revision, path)
        return TreeSource(revision=revision, commit=commit, path=path, files=files, blob_ids=blobs)

    def _read_listing(
        self, listing: bytes, revision: str, path: str = ""
    ) -> tuple[dict[str, bytes], dict[str, str]]:
        """The recipe files of a `git ls-tree -r -z` listing, links resolved by
        the rule the disk reader follows (`engine.load.plan_reads`)."""
        from matrixgen.engine.load import TreeListing, plan_reads

        regular: dict[str, str] = {}
        link_ids: dict[str, str] = {}
        special: dict[str, str] = {}
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, raw_name = entry.partition(b"\t")
            mode, kind, oid = meta.decode().split(" ")
            name = raw_name.decode("utf-8", "surrogateescape")
            if kind == "commit":
                special[name] = "a git submodule"
            elif mode == _MODE_SYMLINK:
                link_ids[name] = oid
            elif mode in _MODE_FILES:
                regular[name] = oid
            else:
                special[name] = f"a git object of mode {mode}"
        targets = self.cat_blobs(sorted(set(link_ids.values())))
        links = {
            name: targets[oid].decode("utf-8", "surrogateescape") for name, oid in link_ids.items()
        }
        directories = {
            name[:cut] for name in (*regular, *links, *special) for cut in _slashes(name)
        }
        plan = plan_reads(
            TreeListing(
                files=frozenset(regular),
                links=links,
                directories=frozenset(directories),
                special=special,
            ),
            root=path or ".",
            where=f"at {revision}",
        )
        blobs = {name: regular[real] for name, real in plan.items()}
        contents = self.cat_blobs(sorted(set(blobs.values())))
        files = {name: contents[oid] for name, oid in blobs.items()}
        return files, blobs

    def cat_blobs(self, oids: Sequence[str]) -> dict[str, bytes]:
        """The contents of many blobs, the ones not read before from one `git
        cat-file --batch` process."""
        contents = self._blobs
        missing = [oid for oid in oids if oid not in contents]
        batch = ("\n".join(missing) + "\n").encode()
        out = self.git(["cat-file", "--batch"], stdin=batch) if missing else b""
        pos = 0
        for oid in missing:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split(" ")
            if len(header) != 3 or header[1] != "blob":
                raise GitError(f"git cat-file: object {oid} is missing or not a file")
            size = int(header[2])
            contents[oid] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1  # the content is followed by a newline
        return {oid: contents[oid] for oid in oids}

    def read_worktree(self, path: str) -> TreeSource:
        """The recipe tree at `path` in the working tree, as it is on disk now."""
        from matrixgen.engine.load import read_directory

        directory = self.top / path if path else self.top
        if not directory.exists():
            return TreeSource(revision=WORKTREE, commit=None, path=path, present=False)
        if not directory.is_dir():
            raise GitError(f'"{path}" is a file, not a directory, in the working tree')
        files = dict(sorted(read_directory(directory).items()))
        blobs = {rel: blob_id(data, self.object_format) for rel, data in files.items()}
        self._blobs.update((blobs[rel], data) for rel, data in files.items())
        return TreeSource(revision=WORKTREE, commit=None, path=path, files=files, blob_ids=blobs)

    def list_paths(self, revision: str, path: str) -> list[str] | None:
        """Every file below `path` (relative to the top) in a commit, as paths
        relative to `path`, from one `git ls-tree` (contents are not read); None
        when `path` is no directory there. Links are listed like files."""
        _, spec, kind = self._object(revision, path)
        if kind != "tree":
            return None
        listing = self.git(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", spec])
        entries = (entry.partition(b"\t") for entry in listing.split(b"\0"))
        blobs = [name for meta, _, name in entries if name and meta.split(b" ")[1:2] == [b"blob"]]
        return [name.decode("utf-8", "surrogateescape") for name in blobs]

    def changed_files(
        self,
        base: str,
        head: str | None,
        path: str,
        trees: dict[str, tuple[str | None, str | None]] | None = None,
    ) -> list[PathChange]:
        """The files below `path` (relative to the top; "" = everywhere) that
        differ between two commits, or between a commit and the working tree
        (head None: untracked files included, ignored ones not), from git's
        tree diff: no file git knows unchanged is read. Renames are a removal
        and an addition. Between two commits, `trees` (when given) gets the
        directories that differ, each with its tree id on either side (None
        where it is not there), from the same diff: a file of theirs is then
        asked of git as `TREE:NAME`, without a walk from the commit's top."""
        spec = ["--", f":(literal){path}"] if path else []
        common = ["-r", "-z", "--raw", "--no-renames", "--no-ext-diff", "--no-textconv"]
        if head is not None:
            changes = _path_changes(self.git(["diff-tree", *common, "-t", base, head, *spec]))
            files = []
            for change in changes:
                if _MODE_TREE not in (change.old_mode, change.new_mode):
                    files.append(change)
                elif trees is not None:
                    trees[change.path] = (
                        change.old if change.old_mode == _MODE_TREE else None,
                        change.new if change.new_mode == _MODE_TREE else None,
                    )
            return files
        changes = _path_changes(self.git(["diff", *common, base, *spec]))
        known = {c.path for c in changes}
        untracked = self.git(["ls-files", "-z", "--others", "--exclude-standard", *spec])
        for raw_name in untracked.split(b"\0"):
            name = raw_name.decode("utf-8", "surrogateescape")
            if name and name not in known:
                changes.append(PathChange(status="A", path=name, new_mode="100644"))
        return sorted(changes, key=lambda c: c.path)

    def blob_info(self, names: Sequence[str]) -> dict[str, tuple[str, int] | None]:
        """The id and size of each blob (named by id, or as `COMMIT:PATH`), from
        one `git cat-file --batch-check`: nothing is read. None where no blob
        is there, and for a name holding a line break (it cannot be asked for)."""
        asked = [n for n in dict.fromkeys(names) if "\n" not in n and "\r" not in n]
        info: dict[str, tuple[str, int] | None] = dict.fromkeys(names)
        if not asked:
            return info
        out = self.git(
            ["cat-file", "--batch-check=%(objecttype) %(objectname) %(objectsize)"],
            stdin=("\n".join(asked) + "\n").encode("utf-8", "surrogateescape"),
        )
        lines = out.decode("utf-8", "replace").split("\n")
        info.update(zip(asked, map(_blob_info, lines), strict=False))
        return info

    def small_blobs(
        self,
        names: Sequence[str],
        limit: int,
        each: Callable[[str, bytes], None] | None = None,
    ) -> dict[str, tuple[str, int, bytes | None] | None]:
        """Each blob (named by id, or as `COMMIT:PATH`) with its id, size and
        bytes, the bytes only within `limit` (a larger blob is never read); None
        as `blob_info` says. One `git cat-file --batch-command` process asks
        every size, then reads the small ones (a git before 2.36: one
        `--batch-check` and one `--batch`). `each(name, bytes)` is called for
        every name read, as its blob comes: the caller's work on one blob runs
        while git reads the next."""
        asked = [n for n in dict.fromkeys(names) if n and "\n" not in n and "\r" not in n]
        out: dict[str, tuple[str, int, bytes | None] | None] = dict.fromkeys(names)
        if not asked:
            return out
        found = self._batch_command(asked, limit, each)
        if found is None:  # an older git
            info = self.blob_info(asked)
            small = sorted({i[0] for i in info.values() if i is not None and i[1] <= limit})
            contents = self.cat_blobs(small)
            found = {
                name: (i[0], i[1], contents.get(i[0])) if i is not None else None
                for name, i in info.items()
            }
            for name, item in found.items():
                if each is not None and item is not None and item[2] is not None:
                    each(name, item[2])
        out.update(found)
        return out

    def _batch_command(
        self, names: Sequence[str], limit: int, each: Callable[[str, bytes], None] | None = None
    ) -> dict[str, tuple[str, int, bytes | None] | None] | None:
        """`small_blobs` through one `git cat-file --batch-command --buffer`:
        `info` of every name, then `contents` of the blobs within the limit,
        each read (and given to `each`) as it comes. None when this git has no
        such command."""
        batch = "--batch-command=%(objecttype) %(objectname) %(objectsize)"
        try:
            process = subprocess.Popen(
                ["git", "cat-file", batch, "--buffer"],
                cwd=self.top,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **_GIT_ENV},
            )
        except FileNotFoundError:
            raise GitError(_NO_GIT) from None
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout
        try:
            commands = "".join(f"info {n}\n" for n in names) + "flush\n"
            writer = write_async(stdin, commands.encode("utf-8", "surrogateescape"))
            lines = [stdout.readline() for _ in names]
            writer.join()
            if not all(lines):  # no answer: this git lacks --batch-command
                return None
            found: dict[str, tuple[str, int, bytes | None] | None] = {}
            for name, line in zip(names, lines, strict=True):
                info = _blob_info(line.decode("utf-8", "replace").rstrip("\n"))
                found[name] = (*info, None) if info is not None else None
            # The blobs within the limit, in the order asked, each with its names.
            users: dict[str, list[str]] = {}
            for name, f in found.items():
                if f is not None and f[1] <= limit:
                    users.setdefault(f[0], []).append(name)
            commands = "".join(f"contents {oid}\n" for oid in users) + "flush\n"
            writer = write_async(stdin, commands.encode(), close=True)
            contents: dict[str, bytes] = {}
            for oid, named in users.items():
                header = stdout.readline().decode().rstrip("\n").split(" ")
                if len(header) != 3 or header[0] != "blob" or not header[2].isdigit():
                    raise GitError(f"git cat-file: object {oid} is missing or not a file")
                size = int(header[2])
                contents[oid] = stdout.read(size)
                # The content is followed by a newline.
                if len(contents[oid]) != size or stdout.read(1) != b"\n":
                    raise GitError(f"git cat-file: object {oid} was cut short")
                for name in named if each is not None else ():
                    each(name, contents[oid])
            writer.join()
            self._blobs.update(contents)
            return {
                name: (f[0], f[1], contents.get(f[0])) if f is not None else None
                for name, f in found.items()
            }
        finally:
            close_quietly(stdin)
            stdout.close()
            process.wait()

    def read(self, revision: str | None, path: str) -> TreeSource:
        """A revision's tree, or the working tree when revision is None."""
        return self.read_worktree(path) if revision is None else self.read_revision(revision, path)


def locate_recipes(given: Path | None, cwd: Path | None = None) -> tuple[Repository, str]:
    """The repository and the tree's path inside it (relative to its top, '/'-separated).

    `given` is a directory as the user typed it (relative to cwd); it need not
    exist in the working tree, since it may exist at one revision only. Without
    it, $MATRIXGEN_RECIPES, else the tree at the top of the repository:
    `recipes/`, else `tests/test_utils/recipes/` when the working tree has it.
    """
    cwd = cwd or Path.cwd()
    if given is None and os.environ.get(RECIPES_VARIABLE):
        given = Path(os.environ[RECIPES_VARIABLE])
    if given is None:
        repo = Repository.discover(cwd)
        return repo, recipes_in(repo.top)
    wanted = Path(os.path.abspath(cwd / given))
    start = wanted
    while not start.is_dir() and start != start.parent:
        start = start.parent
    repo = Repository.discover(start)
    tree = tree_path(repo.top, wanted)
    if tree is None:
        raise UsageError(f"--recipes {given}: not inside the git repository at {repo.top}")
    return repo, tree


class PathChange(Struct, frozen=True, kw_only=True):
    """One file that differs between two sides (`Repository.changed_files`)."""

    status: str  # "A" added, "D" removed, else changed ("M", "T": a type change)
    path: str  # from the top of the repository
    old: str | None = None  # its blob id on the base side (None: added)
    new: str | None = None  # its blob id on the head side (None: removed, or on disk)
    old_mode: str = ""
    new_mode: str = ""


_NO_BLOB = frozenset({"0" * 40, "0" * 64})


def _path_changes(out: bytes) -> list[PathChange]:
    """The entries of `git diff-tree -r -z --raw` (or `git diff`'s)."""
    fields = out.split(b"\0")
    changes = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode().lstrip(":").split(" ")
        if len(meta) != 5:
            continue
        old_mode, new_mode, old, new, status = meta
        name = fields[i + 1].decode("utf-8", "surrogateescape")
        changes.append(
            PathChange(
                status=status[:1],
                path=name,
                old=None if old in _NO_BLOB else old,
                new=None if new in _NO_BLOB else new,
                old_mode=old_mode,
                new_mode=new_mode,
            )
        )
    return changes


def _blob_info(line: str) -> tuple[str, int] | None:
    """A blob's id and size from `git cat-file`'s line "TYPE ID SIZE"."""
    kind, oid, size = [*line.split(" "), "", ""][:3]
    return (oid, int(size)) if kind == "blob" and size.isdigit() else None


def _slashes(name: str) -> list[int]:
    return [i for i, char in enumerate(name) if char == "/"]


def _run_git(
    args: Sequence[str], *, cwd: Path, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """git's result, whatever its exit status (each caller reads that its way)."""
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            check=False,
            env={**os.environ, **_GIT_ENV},
        )
    except FileNotFoundError:
        raise GitError(_NO_GIT) from None
    except NotADirectoryError:
        raise GitError(f"{cwd} is not a directory") from None
