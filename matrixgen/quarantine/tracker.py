"""Tracker state from the GitHub REST API (`GET /repos/{owner}/{repo}/issues/{n}`).

Only what `quarantine audit` needs: is the issue behind an entry open, closed or
gone. The API root is configurable (GitHub Enterprise, or a local server in
tests). Without a token nothing is asked, and the caller says so plainly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from matrixgen.engine.errors import TrackerError

DEFAULT_API_URL = "https://api.github.com"
_ISSUE_URL = re.compile(
    r"^https?://(?P<host>[^/\s]+)/(?P<owner>[^/\s]+)/(?P<repo>[^/\s]+)/(?:issues|pull)/(?P<n>\d+)/?$"
)


@dataclass(frozen=True, slots=True, order=True)
class IssueRef:
    host: str
    owner: str
    repo: str
    number: int

    @property
    def url(self) -> str:
        return f"https://{self.host}/{self.owner}/{self.repo}/issues/{self.number}"


def parse_issue_url(url: str) -> IssueRef | None:
    """`https://github.com/OWNER/REPO/issues/N` (or `/pull/N`) -> IssueRef."""
    found = _ISSUE_URL.match(url.strip())
    if not found:
        return None
    return IssueRef(found["host"].lower(), found["owner"], found["repo"], int(found["n"]))


@dataclass(frozen=True, slots=True)
class IssueState:
    ref: IssueRef
    state: str  # "open", "closed", or "missing" (404/410: deleted or never existed)
    title: str = ""


@dataclass(slots=True)
class GitHubTracker:
    """A small GitHub REST client: issue state, cached per issue for one run."""

    token: str
    api_url: str = DEFAULT_API_URL
    timeout: float = 10.0
    _cache: dict[IssueRef, IssueState] = field(default_factory=dict)

    @property
    def api_host(self) -> str:
        return (urlsplit(self.api_url).hostname or "").lower()

    def can_check(self, ref: IssueRef) -> bool:
        """github.com issues, and issues on the API's own host (GitHub Enterprise)."""
        return ref.host in ("github.com", "www.github.com") or ref.host == self.api_host

    def state(self, ref: IssueRef) -> IssueState:
        if ref not in self._cache:
            self._cache[ref] = self._fetch(ref)
        return self._cache[ref]

    def _fetch(self, ref: IssueRef) -> IssueState:
        import urllib.error
        import urllib.request

        url = f"{self.api_url.rstrip('/')}/repos/{ref.owner}/{ref.repo}/issues/{ref.number}"
        request = urllib.request.Request(
            url,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "matrixgen-quarantine-audit",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                return IssueState(ref, "missing")
            raise TrackerError(_http_problem(exc, url)) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackerError(f"cannot reach the GitHub API at {self.api_url}: {reason}") from None
        try:
            data = json.loads(body)
            state = data["state"]
        except (ValueError, KeyError, TypeError):
            raise TrackerError(
                f"the GitHub API answered {url} with something that is not an issue"
            ) from None
        if state not in ("open", "closed"):
            raise TrackerError(f'the GitHub API gave issue {ref.url} the unknown state "{state}"')
        title = data.get("title") if isinstance(data.get("title"), str) else ""
        return IssueState(ref, state, title)


def _http_problem(exc: object, url: str) -> str:
    code = getattr(exc, "code", 0)
    headers = getattr(exc, "headers", None)
    if code == 401:
        return f"the GitHub API rejected the token (401) for {url}: check GITHUB_TOKEN / --token"
    if code in (403, 429) and headers is not None and headers.get("X-RateLimit-Remaining") == "0":
        reset = headers.get("X-RateLimit-Reset", "?")
        return f"the GitHub API rate limit is used up ({code}); it resets at epoch {reset}"
    if code in (403, 429) and headers is not None and headers.get("Retry-After"):
        # GitHub's secondary rate limits say when to come back, not how much is left.
        retry = headers.get("Retry-After")
        return f"the GitHub API is rate limiting requests ({code}); retry after {retry} s"
    if code == 403:
        return f"the GitHub API refused access (403) to {url}: the token may lack read access"
    return f"the GitHub API answered {code} for {url}"


@dataclass(frozen=True, slots=True)
class TrackerReport:
    """Per entry id: the tracker state, or why it was not checked."""

    states: dict[str, str]
    unchecked: dict[str, str]
    titles: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the API failure that stopped the checks, if any


def check_trackers(
    entries: Iterable[tuple[str, str | None]],
    *,
    token: str | None,
    api_url: str | None = None,
) -> TrackerReport:
    """Look up the tracker of each (entry id, resolved tracker URL or None).

    The first API failure stops the lookups (a bad token or a used-up rate limit
    fails every later one too); the entries left are reported as not checked,
    with the failure, so the caller can still show what it found."""
    states: dict[str, str] = {}
    titles: dict[str, str] = {}
    unchecked: dict[str, str] = {}
    items = list(entries)
    if not token:
        for entry_id, _ in items:
            unchecked[entry_id] = "no GitHub token (set GITHUB_TOKEN or pass --token)"
        return TrackerReport(states, unchecked)
    client = GitHubTracker(token=token, api_url=api_url or DEFAULT_API_URL)
    error: str | None = None
    for entry_id, url in items:
        if error is not None:
            unchecked[entry_id] = f"the GitHub API failed: {error}"
            continue
        if url is None:
            unchecked[entry_id] = (
                "the tracker is #N and no tracker base is set "
                "(quarantine.tracker_base in matrixgen.yaml, or --tracker-base)"
            )
            continue
        ref = parse_issue_url(url)
        if ref is None:
            unchecked[entry_id] = f"{url} is not a GitHub issue or pull request URL"
            continue
        if not client.can_check(ref):
            unchecked[entry_id] = (
                f"{url} is not on github.com nor on the API's host ({client.api_host}); "
                "pass --api-url for GitHub Enterprise"
            )
            continue
        try:
            found = client.state(ref)
        except TrackerError as exc:
            error = exc.message
            unchecked[entry_id] = f"the GitHub API failed: {error}"
            continue
        states[entry_id] = found.state
        if found.title:
            titles[entry_id] = found.title
    return TrackerReport(states, unchecked, titles, error)
