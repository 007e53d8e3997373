"""Tracker state from a local HTTP server that answers like the GitHub REST API,
and `quarantine audit` on top of it."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from matrixgen.model.errors import TrackerError, UsageError
from matrixgen.quarantine.tracker import (
    GitHubTracker,
    check_api_url,
    check_trackers,
    parse_issue_url,
)
from tests.quarantine_fixtures import CONFIG, v2_files

TOKEN = "test-token-123"
ISSUES = {
    ("acme", "ml", 7201): {"state": "open", "title": "EP8 hang"},
    ("acme", "ml", 7734): {"state": "closed", "title": "muon loss"},
    ("acme", "ml", 7958): {"state": "open", "title": "flaky router"},
}


class FakeGitHub(BaseHTTPRequestHandler):
    """GET /repos/{owner}/{repo}/issues/{n}: 200 with state, 404, 401 without the
    token, 403 with X-RateLimit-Remaining: 0 for the `limited` repository."""

    requests: ClassVar[list[tuple[str, str | None]]] = []
    elsewhere: ClassVar[str] = ""

    def do_GET(self) -> None:
        FakeGitHub.requests.append((self.path, self.headers.get("Authorization")))
        parts = self.path.strip("/").split("/")
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(401, {"message": "Bad credentials"})
        if self.headers.get("Accept") != "application/vnd.github+json":
            return self._send(415, {"message": "Unsupported Accept"})
        if len(parts) != 5 or parts[0] != "repos" or parts[3] != "issues":
            return self._send(404, {"message": "Not Found"})
        _, owner, repo, _, number = parts
        if repo == "moved":  # a renamed repository: GitHub answers 301 on its own host
            return self._send(301, {}, {"Location": f"/repos/{owner}/ml/issues/{number}"})
        if repo == "away":
            return self._send(302, {}, {"Location": f"{FakeGitHub.elsewhere}/repos/x/y/issues/1"})
        if repo == "limited":
            return self._send(403, {"message": "rate limit"}, {"X-RateLimit-Remaining": "0"})
        if repo == "broken":
            return self._send(500, {"message": "oops"})
        if repo == "secondary":  # GitHub's secondary rate limit
            return self._send(403, {"message": "slow down"}, {"Retry-After": "60"})
        if repo == "deep":  # an answer nested past any parser's recursion
            return self._send(200, {}, raw=b"[" * 60_000 + b"]" * 60_000)
        issue = ISSUES.get((owner, repo, int(number)))
        if issue is None:
            return self._send(404, {"message": "Not Found"})
        return self._send(200, {"number": int(number), **issue})

    def _send(
        self, code: int, body: dict, headers: dict[str, str] | None = None, raw: bytes = b""
    ) -> None:
        data = raw or json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass


@contextlib.contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[str]:
    server = ThreadingHTTPServer((host, 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api() -> Iterator[str]:
    FakeGitHub.requests = []
    with serving() as url:
        yield url


def url(n: int, repo: str = "ml") -> str:
    return f"https://github.com/acme/{repo}/issues/{n}"


def test_parse_issue_urls() -> None:
    ref = parse_issue_url("https://github.com/acme/ml/issues/7201")
    assert ref and (ref.owner, ref.repo, ref.number) == ("acme", "ml", 7201)
    assert parse_issue_url("https://github.com/acme/ml/pull/5/")
    assert parse_issue_url("https://gitlab.example.com/acme/ml/-/issues/5") is None
    assert parse_issue_url("#5") is None


def test_states_from_the_api(api: str) -> None:
    client = GitHubTracker(token=TOKEN, api_url=api)
    assert client.state(parse_issue_url(url(7201))) == "open"  # type: ignore[arg-type]
    assert client.state(parse_issue_url(url(7734))) == "closed"  # type: ignore[arg-type]
    assert client.state(parse_issue_url(url(1))) == "missing"  # type: ignore[arg-type]
    # Cached: asking again does not ask the server again.
    client.state(parse_issue_url(url(7201)))  # type: ignore[arg-type]
    assert [p for p, _ in FakeGitHub.requests].count("/repos/acme/ml/issues/7201") == 1
    assert all(auth == f"Bearer {TOKEN}" for _, auth in FakeGitHub.requests)


@pytest.mark.parametrize(
    ("token", "repo", "message"),
    [
        ("wrong", "ml", "rejected the token (401)"),
        (TOKEN, "limited", "rate limit is used up"),
        (TOKEN, "broken", "answered 500"),
        (TOKEN, "secondary", "rate limiting requests (403); retry after 60 s"),
        (TOKEN, "deep", "with something that is not an issue"),
    ],
)
def test_api_errors_are_tracker_errors(api: str, token: str, repo: str, message: str) -> None:
    client = GitHubTracker(token=token, api_url=api)
    with pytest.raises(TrackerError) as caught:
        client.state(parse_issue_url(url(7201, repo)))  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert token not in str(caught.value)  # a token never shows in messages


def test_unreachable_api_is_a_tracker_error() -> None:
    client = GitHubTracker(token=TOKEN, api_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(TrackerError, match="cannot reach"):
        client.state(parse_issue_url(url(7201)))  # type: ignore[arg-type]


def test_check_trackers_says_what_it_did_not_check(api: str) -> None:
    entries = [
        ("a", url(7201)),
        ("b", None),  # "#N" without a tracker base
        ("c", "https://gitlab.example.com/acme/ml/-/issues/3"),
        ("d", "https://ghe.corp.example/acme/ml/issues/3"),
        ("e", url(7734)),
    ]
    none = check_trackers(entries, token=None)
    assert none.states == {}
    assert set(none.unchecked) == {"a", "b", "c", "d", "e"}
    assert all("no GitHub token" in r for r in none.unchecked.values())
    report = check_trackers(entries, token=TOKEN, api_url=api)
    assert report.states == {"a": "open", "e": "closed"}
    assert "no tracker base" in report.unchecked["b"]
    assert "not a GitHub issue" in report.unchecked["c"]
    assert "--api-url (or set GITHUB_API_URL) for GitHub Enterprise" in report.unchecked["d"]


# --------------------------------------------------------------------------- audit


AUDIT_QUARANTINE = """entries:
  - id: open-one
    tracker: "#7201"
    kind: flaky
    action: skip
    match: {test_case: ep8_dist_opt}
    owner: alice
    expires: FAR
    reason: r
  - id: closed-one
    tracker: "#7734"
    kind: broken
    action: allow-failure
    match: {test_case: ep8_muon}
    owner: bob
    expires: FAR
    reason: r
  - id: stale
    tracker: "#7958"
    kind: flaky
    action: skip
    match: {test_case: cp2_one_node}
    owner: carol
    expires: PAST
    reason: r
  - id: soon
    tracker: "#7958"
    kind: flaky
    action: skip
    match: {test_case: ep8_muon, environments: [dev]}
    where: [github/L1]
    owner: carol
    expires: SOON
    reason: r
  - id: nothing
    tracker: "#7201"
    kind: flaky
    action: skip
    match: {test_case: ep8_muon, platforms: [dgx_gb200]}
    owner: dan
    expires: FAR
    reason: r
  - id: orphan
    tracker: "#7201"
    kind: flaky
    action: skip
    match: {test_case: ep8_dist_opt, platforms: [dgx_gb200]}
    expires: FAR
    reason: r
"""


def audit_tree(tree: Callable[..., Path]) -> Path:
    today = dt.date.today()
    text = (
        AUDIT_QUARANTINE.replace("FAR", (today + dt.timedelta(days=300)).isoformat())
        .replace("PAST", (today - dt.timedelta(days=2)).isoformat())
        .replace("SOON", (today + dt.timedelta(days=5)).isoformat())
    )
    return tree(v2_files(quarantine=text))


def test_audit_without_token_says_plainly_what_it_did_not_check(
    tree: Callable[..., Path], cli, monkeypatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    run = cli("quarantine", "audit", "--recipes", audit_tree(tree), "--format", "json")
    assert run.code == 1, run  # expired, ownerless, matching nothing
    report = json.loads(run.out)
    problems = {(i["id"], i["problem"]) for i in report["items"]}
    assert problems == {
        ("stale", "expired"),
        ("soon", "expiring"),
        ("nothing", "matches-nothing"),
        ("orphan", "ownerless"),
    }
    assert report["tracker_states"] == {}
    assert len(report["not_checked"]) == 6
    assert "tracker state NOT checked for 6 entries: no GitHub token" in run.err
    assert "a closed tracker there is not reported" in run.err


def test_audit_with_token_reports_closed_trackers(
    tree: Callable[..., Path], cli, api: str, monkeypatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    root = audit_tree(tree)
    run = cli("quarantine", "audit", "--recipes", root, "--api-url", api, "--format", "json")
    assert run.code == 1, run
    report = json.loads(run.out)
    closed = [i for i in report["items"] if i["problem"] == "tracker-closed"]
    assert [(i["id"], i["tracker"]) for i in closed] == [
        ("closed-one", "https://github.com/acme/ml/issues/7734")
    ]
    assert report["tracker_states"]["open-one"] == "open"
    assert report["not_checked"] == {}
    # Each issue is asked once, however many entries share it.
    paths = [p for p, _ in FakeGitHub.requests]
    assert sorted(paths) == sorted(set(paths))
    # --days widens "expiring"; table output lists every problem.
    table = cli("quarantine", "audit", "--recipes", root, "--api-url", api, "--days", "400")
    assert table.code == 1
    assert table.out.count("expiring") == 5  # the four 300-day ones and the 5-day one


def test_audit_of_a_clean_file_exits_zero(tree: Callable[..., Path], cli, api, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    far = (dt.date.today() + dt.timedelta(days=300)).isoformat()
    clean = AUDIT_QUARANTINE.split("  - id: closed-one")[0].replace("FAR", far)
    run = cli(
        "quarantine", "audit", "--recipes", tree(v2_files(quarantine=clean)), "--api-url", api
    )
    assert run.code == 0, run
    assert "1 entry (its tracker checked): 0 problem(s)" in run.err


def test_audit_tracker_failure_exits_8(tree: Callable[..., Path], cli, api, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "not-the-token")
    run = cli("quarantine", "audit", "--recipes", audit_tree(tree), "--api-url", api)
    assert run.code == 8, run
    assert "rejected the token (401)" in run.err
    assert "not-the-token" not in run.err


def test_a_tracker_failure_stops_the_lookups_and_says_what_was_not_checked(api: str) -> None:
    entries = [("a", url(7201)), ("b", url(7201, "broken")), ("c", url(7734)), ("d", None)]
    report = check_trackers(entries, token=TOKEN, api_url=api)
    assert report.states == {"a": "open"}
    assert report.error is not None and "answered 500" in report.error
    assert set(report.unchecked) == {"b", "c", "d"}
    assert report.unchecked["c"] == f"the GitHub API failed: {report.error}"
    # Nothing more was asked after the failure.
    assert [p for p, _ in FakeGitHub.requests] == [
        "/repos/acme/ml/issues/7201",
        "/repos/acme/broken/issues/7201",
    ]


def test_audit_lists_what_it_found_before_exiting_8(
    tree: Callable[..., Path], cli, api: str, monkeypatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    root = audit_tree(tree)
    config = (root / "matrixgen.yaml").read_text()
    (root / "matrixgen.yaml").write_text(config.replace("acme/ml/issues", "acme/broken/issues"))
    run = cli("quarantine", "audit", "--recipes", root, "--api-url", api, "--format", "json")
    assert run.code == 8, run
    report = json.loads(run.out)
    problems = {(i["id"], i["problem"]) for i in report["items"]}
    assert ("stale", "expired") in problems and ("orphan", "ownerless") in problems
    assert "answered 500" in report["tracker_error"]
    assert len(report["not_checked"]) == 6 and report["tracker_states"] == {}
    assert "tracker state NOT checked for 6 entries: the GitHub API failed" in run.err
    assert len(FakeGitHub.requests) == 1
    table = cli("quarantine", "audit", "--recipes", root, "--api-url", api)
    assert table.code == 8 and "expired" in table.out and "answered 500" in table.err


def test_audit_tracker_base_option_resolves_numbers(
    tree: Callable[..., Path], cli, api, monkeypatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    # A config without tracker_base: #N cannot be checked unless --tracker-base says where.
    files = v2_files()
    files["matrixgen.yaml"] = files["matrixgen.yaml"].replace(
        "  tracker_base: https://github.com/acme/ml/issues/\n", ""
    )
    root = tree(files)
    plain = cli("quarantine", "audit", "--recipes", root, "--api-url", api, "--format", "json")
    assert "no tracker base" in json.loads(plain.out)["not_checked"]["ep8-dist-opt"]
    based = cli(
        "quarantine", "audit", "--recipes", root, "--api-url", api, "--format", "json",
        "--tracker-base", "https://github.com/acme/ml/issues",
    )  # fmt: skip
    states = json.loads(based.out)["tracker_states"]
    assert states == {"ep8-dist-opt": "open", "ep8-muon": "closed", "unit-bucket": "open"}


# ------------------------------------------------------------ the token's trust boundary


def test_the_token_goes_only_over_https_or_to_loopback() -> None:
    assert check_api_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/v3"
    for fine in (
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://[::1]:9",
        "http://127.9.9.9",
    ):
        assert check_api_url(fine) == fine
    for bad, why in [
        ("http://api.github.com", "only over https"),
        ("http://10.0.0.1", "only over https"),
        ("http://127.0.0.1.evil.example", "only over https"),
        ("ftp://api.github.com", "expected https"),
        ("api.github.com", "expected https"),
        ("https://user:pw@api.github.com", "without user"),
        ("https://api.github.com/?x=1", "without user"),
        ("https://:99999/", "expected https"),
    ]:
        with pytest.raises(UsageError, match=why):
            check_api_url(bad)
    with pytest.raises(UsageError):
        GitHubTracker(token=TOKEN, api_url="http://example.com")


def test_issue_urls_cannot_climb_the_api_path() -> None:
    for odd in [
        "https://github.com/../x/issues/1",
        "https://github.com/a/../issues/1",
        "https://github.com/a/./issues/1",
        "https://github.com/a%2F..%2Fb/r/issues/1",
        "https://github.com@evil.example/a/b/issues/1",
        "https://github.com/a/b?x=/issues/1",
    ]:
        assert parse_issue_url(odd) is None, odd
    assert parse_issue_url("https://github.com/a-b/c_d.e/issues/1") is not None


def test_redirects_stay_on_the_api_origin(api: str) -> None:
    client = GitHubTracker(token=TOKEN, api_url=api)
    moved = client.state(parse_issue_url(url(7201, "moved")))  # type: ignore[arg-type]
    assert moved == "open"  # followed: same origin
    with serving("127.0.0.2") as elsewhere:
        FakeGitHub.elsewhere = elsewhere
        FakeGitHub.requests = []
        with pytest.raises(TrackerError, match=r"redirected .* not followed"):
            client.state(parse_issue_url(url(7201, "away")))  # type: ignore[arg-type]
        # The other server was never asked, with the token or without.
        assert [p for p, _ in FakeGitHub.requests] == ["/repos/acme/away/issues/7201"]


def test_the_tree_cannot_say_where_the_token_goes(
    tree: Callable[..., Path], cli, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    hostile = CONFIG.replace("quarantine:\n", f"quarantine:\n  api_url: {api}\n")
    root = tree(v2_files(config=hostile))
    for command in (["validate"], ["quarantine", "audit"], ["generate", "--out", root / "o"]):
        run = cli(*command, "--recipes", root)
        assert run.code == 3, run
        assert "quarantine.api_url is not read from the tree" in run.err
    assert FakeGitHub.requests == []  # no request reached the tree's server
    # The one running the command names the API root: a flag or GITHUB_API_URL.
    clean = tree(v2_files())
    monkeypatch.setenv("GITHUB_API_URL", api)
    run = cli("quarantine", "audit", "--recipes", clean, "--format", "json")
    assert json.loads(run.out)["tracker_states"], run
    assert FakeGitHub.requests and all(a == f"Bearer {TOKEN}" for _, a in FakeGitHub.requests)
    monkeypatch.setenv("GITHUB_API_URL", "http://tracker.example")
    refused = cli("quarantine", "audit", "--recipes", clean)
    assert refused.code == 2 and "only over https" in refused.err
