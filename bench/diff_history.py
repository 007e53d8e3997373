"""`matrixgen diff` over a real Megatron-LM checkout's history, with one fixed
list of targets, against Megatron-LM's own parser.

    python bench/diff_history.py CHECKOUT [--commits N] [--recipes DIR]
        [--parser FILE] [--targets FILE] [--json]
    python bench/diff_history.py --print-targets

CHECKOUT is a git checkout of Megatron-LM. The script takes the last N commits
that changed its recipe tree (`git log -n N -- DIR`, default N 50, DIR
tests/test_utils/recipes), oldest first, and compares each with the one before
it, as a CI that keeps one target list would: `matrixgen diff BASE HEAD
--format json` with one `--target` per target of the list (by default the 42
targets Megatron-LM's CI files call its generator for; `--targets FILE`: one
key=value target per line). For each commit it asks Megatron-LM's parser
(`recipe_parser.load_workloads`, FILE by default the checkout's own
tests/test_utils/python_scripts/recipe_parser.py, run on that commit's tree in a
temporary copy) what each target selects, and counts, per target of each pair:

- agree: the diff's parser view (jobs added, moved in, and the habits and
  arrivals the parser sees as added; the same for removed) is, job by job, what
  the parser gains and loses between the two commits, and (when neither commit
  has a quarantine file) the jobs columns are what it selects on each side;
- disagree: anything else (listed);
- refused: a diff that exited non-zero (by exit code: every target of the pair);
- reference failed: the parser itself raised for that target at one of the
  two commits (not compared).

It needs matrixgen on PATH (or `--matrixgen CMD`), git, and click and PyYAML
for the parser. `--json` prints the counts as JSON (what the test suite reads).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

RECIPES = "tests/test_utils/recipes"
PARSER = "tests/test_utils/python_scripts/recipe_parser.py"


def _fixed_targets() -> list[str]:
    """Every target Megatron-LM's CI files call generate_jet_trigger_job.py for
    (.gitlab/stages/02.test.yml, 03.integration-tests.yml and
    04.functional-tests.yml with every scope its scheduled pipelines pass, the
    unit tests per environment and tag, 03's `dgx_gb2100` included;
    .github/workflows/cicd-main.yml for L0 and L1 without a cadence): 42. The
    test suite checks the list against the CI files."""
    out = []
    for scope in ("mr", "mr-slim", "nightly", "release", "unit-tests", "weekly"):
        for platform in ("dgx_a100", "dgx_gb200", "dgx_gb2100", "dgx_h100"):
            for env in ("dev", "lts"):
                if scope == "unit-tests":
                    if platform != "dgx_h100":
                        continue
                    out += [
                        f"system=gitlab,scope={scope},platform={platform},environment={env},"
                        f"tag={tag}"
                        for tag in ("latest", "legacy")
                    ]
                    continue
                if platform == "dgx_gb2100" and (scope not in ("mr", "mr-slim") or env != "lts"):
                    continue
                out.append(f"system=gitlab,scope={scope},platform={platform},environment={env}")
    github = [
        f"system=github,scope={scope},platform={platform},environment=dev"
        for scope in ("L0", "L1")
        for platform in ("dgx_gb200", "dgx_h100")
    ]
    smoke = [
        f"system=gitlab,scope=L0-smoke,platform={platform},environment=dev"
        for platform in ("dgx_gb200", "dgx_h100")
    ]
    return [*github, *smoke, *out]


FIXED_TARGETS = _fixed_targets()

# Runs in a temporary copy of one commit's tree, beside the parser: reads
# [[scope, platform, environment, tag, cadence], ...] as JSON on stdin and prints,
# per target, the sorted identities of the test workloads the parser selects
# (or {"error": ...}). Files are listed in path order (the parser takes the file
# system's order, which differs between machines), and each distinct file text
# is parsed once, with PyYAML's C loader (the same data as the pure-Python one),
# a deep copy handed out each time (the parser changes what it loads).
DRIVER = r"""
import copy, importlib.util, json, pathlib, sys

import yaml

_glob = pathlib.Path.glob
pathlib.Path.glob = lambda self, pattern: iter(sorted(_glob(self, pattern), key=str))
_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_parsed = {}


def _load(stream):
    text = stream.read() if hasattr(stream, "read") else stream
    if text not in _parsed:
        _parsed[text] = yaml.load(text, Loader=_loader)
    return copy.deepcopy(_parsed[text])


yaml.safe_load = _load
spec = importlib.util.spec_from_file_location("recipe_parser", sys.argv[1])
parser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parser)
answer = []
for scope, platform, environment, tag, cadence in json.load(sys.stdin):
    try:
        found = parser.load_workloads(
            container_tag="t", scope=scope, platform=platform,
            environment=environment, tag=tag, cadence=cadence,
        )
        answer.append(sorted({
            (w.spec["model"], w.spec["test_case"], w.spec["environment"],
             w.spec["platforms"], w.spec.get("tag") or "")
            for w in found if "test_case" in w.spec
        }))
    except Exception as exc:
        answer.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(answer))
"""


def parse_spec(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.split(","))


def target_name(text: str) -> str:
    """The name the diff gives a target given as key=value pairs."""
    fields = parse_spec(text)
    keys = ("system", "scope", "platform", "environment", "cadence", "model", "tag")
    return "-".join(fields[k] for k in keys if fields.get(k))


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout


def commits(checkout: Path, recipes: str, n: int) -> list[str]:
    """The last n commits that changed the recipe tree, oldest first."""
    return git(checkout, "log", "-n", str(n), "--format=%H", "--", recipes).split()[::-1]


def has_quarantine(checkout: Path, commit: str, recipes: str) -> bool:
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}:{recipes}/quarantine.yaml"],
        cwd=checkout,
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


def parser_selection(
    checkout: Path, commit: str, recipes: str, parser: Path, targets: list[str], work: Path
) -> list[Any]:
    """What the parser selects for each target at one commit: a set of
    identities, or the error it raised."""
    top = work / commit
    (top / "tests" / "test_utils" / "python_scripts").mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "--", recipes],
        cwd=checkout,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(top)], input=archive, check=True)
    copied = top / "tests" / "test_utils" / "python_scripts" / "recipe_parser.py"
    shutil.copyfile(parser, copied)
    if recipes != RECIPES and (top / recipes).is_dir():
        shutil.move(str(top / recipes), str(top / RECIPES))
    (top / RECIPES).mkdir(parents=True, exist_ok=True)
    asks = []
    for text in targets:
        fields = parse_spec(text)
        asks.append([fields.get(k) for k in ("scope", "platform", "environment", "tag", "cadence")])
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(copied)],
        input=json.dumps(asks),
        capture_output=True,
        text=True,
        check=True,
        cwd=top,
    )
    shutil.rmtree(top)
    return [
        answer if isinstance(answer, dict) else {tuple(i) for i in answer}
        for answer in json.loads(done.stdout)
    ]


def _identity(job: dict[str, Any]) -> tuple[str, ...]:
    return (job["model"], job["test_case"], job["environment"], job["platform"], job["tag"] or "")


def parser_view(target: dict[str, Any]) -> tuple[set, set]:
    """What the diff says the parser gains and loses in one target."""
    gained = {_identity(j) for j in target["added"]}
    lost = {_identity(j) for j in target["removed"]}
    gained |= {_identity(m["job"]) for m in target["moved_in"]}
    lost |= {_identity(m["job"]) for m in target["moved_out"]}
    for q in target["quarantine"]:
        if q["parser"] == "added":
            gained.add(_identity(q["job"]))
        elif q["parser"] == "removed":
            lost.add(_identity(q["job"]))
    return gained, lost


def compare_pair(
    diff: dict[str, Any], targets: list[str], before: list[Any], after: list[Any], counts: bool
) -> tuple[int, int, list[dict[str, Any]]]:
    """(agree, reference failed, disagreements) over the targets of one pair."""
    by_name = {t["name"]: t for t in diff["targets"]}
    agree = failed = 0
    wrong = []
    for text, old, new in zip(targets, before, after, strict=True):
        if isinstance(old, dict) or isinstance(new, dict):
            failed += 1
            continue
        got = by_name.get(target_name(text))
        problems = []
        if got is None:
            problems.append("the diff has no such target")
        else:
            if parser_view(got) != (new - old, old - new):
                gained, lost = parser_view(got)
                problems.append(
                    f"diff +{len(gained)} -{len(lost)}, parser +{len(new - old)} -{len(old - new)}"
                )
            jobs = (got["jobs"]["base"], got["jobs"]["head"])
            if counts and jobs != (len(old), len(new)):
                problems.append(f"jobs {jobs}, parser {(len(old), len(new))}")
        if problems:
            wrong.append({"target": text, "problems": problems})
        else:
            agree += 1
    return agree, failed, wrong


def run(args: argparse.Namespace) -> dict[str, Any]:
    checkout = Path(args.checkout).resolve()
    targets = (
        [line.strip() for line in Path(args.targets).read_text().splitlines() if line.strip()]
        if args.targets
        else list(FIXED_TARGETS)
    )
    parser = Path(args.parser) if args.parser else checkout / PARSER
    history = commits(checkout, args.recipes, args.commits)
    matrixgen = shlex.split(args.matrixgen)
    report: dict[str, Any] = {
        "commits": len(history),
        "pairs": max(0, len(history) - 1),
        "targets": len(targets),
        "agree": 0,
        "reference_failed": 0,
        "refused": Counter(),
        "disagree": [],
    }
    with tempfile.TemporaryDirectory(prefix="diff-history-") as tmp:
        work = Path(tmp)
        selected = {
            c: parser_selection(checkout, c, args.recipes, parser, targets, work) for c in history
        }
        for base, head in itertools.pairwise(history):
            command = [*matrixgen, "diff", base, head, "--recipes", args.recipes]
            command += ["--format", "json"]
            for text in targets:
                command += ["--target", text]
            done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
            if done.returncode != 0:
                report["refused"][str(done.returncode)] += len(targets)
                report["disagree"].append(
                    {"pair": [base, head], "target": "*", "problems": [done.stderr.strip()[:400]]}
                )
                continue
            counts = not has_quarantine(checkout, base, args.recipes) and not has_quarantine(
                checkout, head, args.recipes
            )
            agree, failed, wrong = compare_pair(
                json.loads(done.stdout), targets, selected[base], selected[head], counts
            )
            report["agree"] += agree
            report["reference_failed"] += failed
            report["disagree"] += [{"pair": [base, head], **w} for w in wrong]
    report["refused"] = dict(report["refused"])
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", nargs="?", help="a git checkout of Megatron-LM")
    ap.add_argument("--commits", type=int, default=50, help="how many commits (default 50)")
    ap.add_argument("--recipes", default=RECIPES, help=f"the recipe tree (default {RECIPES})")
    ap.add_argument("--parser", help=f"the reference parser (default CHECKOUT/{PARSER})")
    ap.add_argument("--targets", help="a file of key=value targets, one a line")
    ap.add_argument("--matrixgen", default="matrixgen", help="the command (default matrixgen)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument("--print-targets", action="store_true", help="print the fixed list")
    args = ap.parse_args(argv)
    if args.print_targets:
        print("\n".join(FIXED_TARGETS))
        return 0
    if not args.checkout:
        ap.error("give the checkout")
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    compared = report["pairs"] * report["targets"]
    print(
        f"{report['commits']} commits, {report['pairs']} pairs, {report['targets']} targets: "
        f"{compared} target comparisons"
    )
    print(f"  agree:            {report['agree']}")
    print(f"  disagree:         {len(report['disagree'])}")
    print(f"  refused:          {sum(report['refused'].values())} {report['refused'] or ''}")
    print(f"  reference failed: {report['reference_failed']}")
    for item in report["disagree"][:20]:
        pair = item.get("pair", ["", ""])
        print(f"  {pair[0][:10]}..{pair[1][:10]} {item['target']}: {'; '.join(item['problems'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
