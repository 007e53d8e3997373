"""Tracker state from the GitHub REST API (`GET /repos/{owner}/{repo}/issues/{n}`).

Only what `quarantine audit` needs: is an entry's issue open, closed or gone.
The token never goes where the tree says: the API root's rules (https, loopback
http, redirects) are told in docs/security.md ("credentials").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlsplit

from msgspec import Struct, field

from matrixgen.model.errors import TrackerError, UsageError
from matrixgen.util.jsontext import JsonInputError, load_bounded
from matrixgen.util.patterns import name_pattern, whole

DEFAULT_API_URL = "https://api.github.com"
API_URL_VARIABLE = "GITHUB_API_URL"
# GitHub's own rules for names: an owner is letters, digits and '-'; a repository
# also '_' and '.', but never '.' or '..' alone (which would climb the API's path).
_ISSUE_URL = name_pattern(
    r"https?://(?P<host>[A-Za-z0-9.-]+(?::\d+)?)/(?P<owner>[A-Za-z0-9-]+)/"
    r"(?P<repo>(?!\.\.?/)[A-Za-z0-9_.-]+)/(?:issues|pull)/(?P<n>\d{1,18})/?"
)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_api_url(url: str) -> str:
    """The API root a token may be sent to, normalised (no trailing slash); a
    UsageError for one that is not https (or http to a loopback address, for tests),
    or that carries credentials, a query or a fragment of its own."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        host, parts = "", urlsplit("")
    if not host or parts.scheme not in ("https", "http"):
        raise UsageError(
            f'API URL "{url}": expected https://HOST[/PATH] (--api-url, {API_URL_VARIABLE})'
        )
    if parts.scheme == "http" and not _is_loopback(host):
        raise UsageError(
            f'API URL "{url}": the token is sent only over https (plain http only to a '
            "loopback address such as 127.0.0.1)"
        )
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise UsageError(
            f'API URL "{url}": give the API root alone, without user, query or fragment'
        )
    return url.strip().rstrip("/")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class IssueRef(Struct, frozen=True, order=True):
    host: str
    owner: str
    repo: str
    number: int


def parse_issue_url(url: str) -> IssueRef | None:
    """`https://github.com/OWNER/REPO/issues/N` (or `/pull/N`) -> IssueRef."""
    found = whole(_ISSUE_URL, url.strip())
    if not found:
        return None
    return IssueRef(found["host"].lower(), found["owner"], found["repo"], int(found["n"]))


class GitHubTracker(Struct):
    """A small GitHub REST client: issue state, cached per issue for one run."""

    token: str
    api_url: str = DEFAULT_API_URL
    timeout: float = 10.0
    _cache: dict[IssueRef, str] = field(default_factory=dict)
    _opener: Any = None

    def __post_init__(self) -> None:
        self.api_url = check_api_url(self.api_url)
        self._opener = _opener(self.api_url)

    @property
    def api_host(self) -> str:
        return (urlsplit(self.api_url).hostname or "").lower()

    def can_check(self, ref: IssueRef) -> bool:
        """github.com issues, and issues on the API's own host (GitHub Enterprise)."""
        return ref.host in ("github.com", "www.github.com") or ref.host == self.api_host

    def state(self, ref: IssueRef) -> str:
        """The issue's state: open, closed, or missing (404/410: deleted or never existed)."""
        if ref not in self._cache:
            self._cache[ref] = self._fetch(ref)
        return self._cache[ref]

    def _fetch(self, ref: IssueRef) -> str:
        import urllib.error
        import urllib.request

        path = "/".join(quote(part, safe="") for part in (ref.owner, ref.repo))
        url = f"{self.api_url}/repos/{path}/issues/{ref.number}"
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
            with self._opener.open(request, timeout=self.timeout) as response:
                body = response.read(_MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                return "missing"
            raise TrackerError(_http_problem(exc, url)) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackerError(f"cannot reach the GitHub API at {self.api_url}: {reason}") from None
        if len(body) > _MAX_BODY:
            raise TrackerError(f"the GitHub API answered {url} with more than {_MAX_BODY:,} bytes")
        try:
            data = load_bounded(body)
            state = data["state"]
        except (JsonInputError, KeyError, TypeError):
            raise TrackerError(
                f"the GitHub API answered {url} with something that is not an issue"
            ) from None
        if state not in ("open", "closed"):
            issue = f"https://{ref.host}/{ref.owner}/{ref.repo}/issues/{ref.number}"
            raise TrackerError(f'the GitHub API gave issue {issue} the unknown state "{state}"')
        return state


# An issue's JSON is a few KB; a server that sends megabytes is not the GitHub API.
_MAX_BODY = 4 * 1024 * 1024


def _opener(api_url: str) -> Any:
    """An opener that follows a redirect only within the API root's origin
    (docs/security.md); it reads no proxy settings other than the environment's."""
    import urllib.request

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(  # type: ignore[override]
            self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> Any:
            if _origin(newurl) != _origin(api_url):
                raise TrackerError(
                    f"the GitHub API redirected {req.full_url} to {newurl}, away from "
                    f"{api_url}: not followed (the token goes to the API root only)"
                )
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(Redirects)


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


class TrackerReport(Struct, frozen=True):
    """Per entry id: the tracker state, or why it was not checked."""

    states: dict[str, str]
    unchecked: dict[str, str]
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
    if not token:
        why = "no GitHub token (set GITHUB_TOKEN or pass --token)"
        return TrackerReport({}, {entry_id: why for entry_id, _ in entries})
    states: dict[str, str] = {}
    unchecked: dict[str, str] = {}
    client = GitHubTracker(token=token, api_url=api_url or DEFAULT_API_URL)  # checked there
    error: str | None = None
    for entry_id, url in entries:
        ref = parse_issue_url(url) if url is not None else None
        if error is not None:
            unchecked[entry_id] = f"the GitHub API failed: {error}"
        elif url is None:
            unchecked[entry_id] = (
                "the tracker is #N and no tracker base is set "
                "(quarantine.tracker_base in matrixgen.yaml, or --tracker-base)"
            )
        elif ref is None:
            unchecked[entry_id] = f"{url} is not a GitHub issue or pull request URL"
        elif not client.can_check(ref):
            unchecked[entry_id] = (
                f"{url} is not on github.com nor on the API's host ({client.api_host}); "
                f"pass --api-url (or set {API_URL_VARIABLE}) for GitHub Enterprise"
            )
        else:
            try:
                states[entry_id] = client.state(ref)
            except TrackerError as exc:
                error = exc.message
                unchecked[entry_id] = f"the GitHub API failed: {error}"
    return TrackerReport(states, unchecked, error)
