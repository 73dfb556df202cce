"""The connector contract's cases: for each connector kind, its replay over real records
(../shared/data), a configuration for a replay's URL, the records a full pull must store with
their incident dates, and the vendor's own answers for the faults the contract injects (a 5xx, its
429 naming its wait where it does, in headers or in the body, a page without its array, refused
credentials), a record made unmappable and an edit made while a pull runs.
`tests/sources/integration/test_connector_contract.py` runs one suite over every case."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.replay import github, incidentio, jira, opsgenie, pagerduty, sentry, servicenow
from tests.replay.clock import VirtualTime
from tests.replay.server import Handler, Reply, Request


@dataclass
class VendorCase:
    """One connector kind against its replay.

    `config(url)`: the connector configuration for a replay at `url`. `expected`: external id ->
    incident date of every record a full pull stores. `is_page`: the requests that list records.
    `rate_limited`: the vendor's own 429, and `rate_wait` the seconds it asks for. `edit(id, title,
    at)`: the record's title changed at `at` (its update time moves there); `edit_target`: a record
    whose edit a connector must pick up by the next pull. `break_record()`: makes one record
    unmappable (a date that is no date) and names it. `refuse_credentials()`: the vendor now refuses them."""

    kind: str
    handler: Handler
    config: Callable[[str], dict[str, Any]]
    expected: dict[str, datetime]
    is_page: Callable[[Request], bool]
    server_error: Reply
    rate_limited: Reply
    rate_wait: float
    missing_array: Reply
    refuse_credentials: Callable[[], None]
    break_record: Callable[[], str]
    edit: Callable[[str, str, datetime], None]
    edit_target: str
    title_of: Callable[[str], str]
    clock: VirtualTime


def _gitbugs(shared: Path) -> Path:
    return shared / "gitbugs_hadoop" / "reports.jsonl"


def _kev(shared: Path) -> Path:
    return shared / "cisa_kev" / "known_exploited_vulnerabilities.json"


def jira_case(shared: Path, count: int = 300) -> VendorCase:
    issues = json.loads(json.dumps(jira.hadoop_issues(_gitbugs(shared))[:count]))
    replay = jira.JiraReplay(issues=issues)
    by_key = {issue["key"]: issue for issue in issues}
    last = max(issue["fields"]["updated"] for issue in issues)

    def refuse() -> None:
        replay.expired = True

    def broken() -> str:
        key = str(issues[count // 2]["key"])
        replay.broken_keys.add(key)
        return key

    return VendorCase(
        kind="jira",
        handler=replay,
        config=lambda url: {"base_url": url, "personal_access_token": replay.token, "jql": "project = HADOOP", "api": "v2", "page_size": 50},
        expected={key: datetime.strptime(issue["fields"]["created"], jira.JIRA_TIME).replace(tzinfo=UTC) for key, issue in by_key.items()},
        is_page=lambda request: request.path == "/rest/api/2/search",
        server_error=Reply(500, json={"errorMessages": ["Internal server error"], "errors": {}}),
        # Jira's 429 names its wait in Retry-After, with the X-RateLimit-* window beside it.
        rate_limited=Reply(
            429, json={"errorMessages": ["Rate limit exceeded."], "errors": {}}, headers={"Retry-After": "5", "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0"}
        ),
        rate_wait=5.0,
        missing_array=Reply(json={"expand": "schema,names", "startAt": 0, "maxResults": 50, "total": count}),
        refuse_credentials=refuse,
        break_record=broken,
        edit=lambda key, title, at: replay.edit(key, summary=title, updated=at),
        edit_target=min(issues, key=lambda issue: (issue["fields"]["updated"], issue["key"]))["key"],  # on the first page
        title_of=lambda key: str(by_key[key]["fields"]["summary"]),
        clock=VirtualTime(datetime.strptime(last, jira.JIRA_TIME).replace(tzinfo=UTC) + timedelta(days=30)),
    )


def github_case(shared: Path, count: int = 300) -> VendorCase:
    clock = VirtualTime(datetime(2026, 1, 15, 9, 30, tzinfo=UTC))
    replay = github.GitHubReplay.from_hadoop(_gitbugs(shared), limit=count, clock=clock.epoch)
    numbers = sorted(replay.issue_numbers)

    def refuse() -> None:
        replay.tokens.clear()

    def broken() -> str:
        number = numbers[len(numbers) // 2]
        replay.issues[number]["created_at"] = "not a date"
        return str(number)

    def edit(number: str, title: str, at: datetime) -> None:
        replay.issues[int(number)].update(title=title, updated_at=github.iso(at))

    return VendorCase(
        kind="github",
        handler=replay.handle,
        config=lambda url: {"owner": "apache", "repo": "hadoop", "token": github.TOKEN, "base_url": url, "per_page": 50},
        expected={str(number): datetime.fromisoformat(replay.issues[number]["created_at"].replace("Z", "+00:00")) for number in numbers},
        is_page=lambda request: request.path == "/repos/apache/hadoop/issues",
        server_error=Reply(502, json={"message": "Server Error"}),
        # A secondary rate limit: 403 with Retry-After, as GitHub documents it.
        rate_limited=Reply(
            403,
            json={"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "documentation_url": github.DOCS_RATE_LIMIT},
            headers={"Retry-After": "30"},
        ),
        rate_wait=30.0,
        missing_array=Reply(json={"message": "Moved Permanently", "url": "https://api.github.com/repositories/1/issues"}),
        refuse_credentials=refuse,
        break_record=broken,
        edit=edit,
        edit_target=str(next(issue["number"] for issue in replay.ordered() if issue["number"] in replay.issue_numbers)),  # on the first page
        title_of=lambda number: str(replay.issues[int(number)]["title"]),
        clock=clock,
    )


def pagerduty_case(shared: Path, start: datetime = datetime(2025, 3, 1, tzinfo=UTC)) -> VendorCase:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    replay = pagerduty.PagerDutyReplay(pagerduty.kev_incidents(_kev(shared)), token="pd-api-key-valid")
    served = replay.between(start, clock.now())

    def broken() -> str:
        incident = served[len(served) // 2]
        replay.break_incident(incident.id)
        return incident.id

    def edit(incident_id: str, title: str, at: datetime) -> None:
        replay.incidents[incident_id].data.update(title=title, updated_at=pagerduty.pd_time(at))

    return VendorCase(
        kind="pagerduty",
        handler=replay,
        config=lambda url: {"api_key": "pd-api-key-valid", "base_url": url, "start": start.isoformat(), "limit": 25, "window_days": 60},
        expected={incident.id: incident.created for incident in served},
        is_page=lambda request: request.path == "/incidents",
        server_error=Reply(500, json={"error": {"message": "Internal Server Error", "code": 2000}}),
        rate_limited=Reply(
            429, json={"error": {"message": "Rate Limit Exceeded", "code": 2020}}, headers={"ratelimit-limit": "960", "ratelimit-remaining": "0", "ratelimit-reset": "60"}
        ),
        rate_wait=60.0,
        missing_array=Reply(json={"limit": 25, "offset": 0, "more": False, "total": None}),
        refuse_credentials=replay.expire_token,
        break_record=broken,
        edit=edit,
        # PagerDuty lists incidents by creation time only: an edit is read again within the lookback before the cursor.
        edit_target=served[-1].id,
        title_of=lambda incident_id: str(replay.incidents[incident_id].data["title"]),
        clock=clock,
    )


def servicenow_case(shared: Path, count: int = 300) -> VendorCase:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    incidents = servicenow.kev_incidents(_kev(shared), limit=count)
    replay = servicenow.ServiceNowReplay(incidents, clock=clock.now())
    by_number = {incident.values["number"]: incident for incident in incidents}

    def refuse() -> None:
        replay.tokens.clear()

    def broken() -> str:
        incident = incidents[count // 2]
        replay.break_incident(incident.values["sys_id"])
        return incident.values["number"]

    def edit(number: str, title: str, at: datetime) -> None:
        replay.edit(by_number[number].values["sys_id"], short_description=title, at=at)

    reset = str(int(clock.epoch()) + 40)
    return VendorCase(
        kind="servicenow",
        handler=replay,
        config=lambda url: {"instance_url": url, "oauth_token": "snow-oauth-valid", "page_size": 50},
        expected={number: datetime.strptime(incident.values["opened_at"], servicenow.STORED).replace(tzinfo=UTC) for number, incident in by_number.items()},
        is_page=lambda request: request.path == "/api/now/table/incident",
        server_error=servicenow.error(503, "Service Unavailable", "The instance is being upgraded"),
        rate_limited=Reply(
            429,
            json={"error": {"message": "Rate limit exceeded", "detail": "Rate limit of 1000 requests per hour for Table API exceeded"}, "status": "failure"},
            headers={"Retry-After": "40", "X-RateLimit-Limit": "1000", "X-RateLimit-Reset": reset, "X-RateLimit-Rule": "b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7"},
        ),
        rate_wait=40.0,
        missing_array=Reply(json={"results": []}),
        refuse_credentials=refuse,
        break_record=broken,
        edit=edit,
        edit_target=replay.ordered()[0].values["number"],  # on the first page
        title_of=lambda number: by_number[number].values["short_description"],
        clock=clock,
    )


def opsgenie_case(shared: Path) -> VendorCase:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    alerts = opsgenie.openstack_alerts(shared / "loghub_2k" / "OpenStack" / "OpenStack_2k.log_structured.csv")
    replay = opsgenie.OpsgenieReplay(alerts, opsgenie.blocker_incidents(_gitbugs(shared)))
    everything = {**replay.alerts, **replay.incidents}

    def refuse() -> None:
        replay.keys.clear()

    def broken() -> str:
        alert = alerts[len(alerts) // 2]
        alert.broken = True
        return str(alert.data["id"])

    return VendorCase(
        kind="opsgenie",
        handler=replay,
        config=lambda url: {"api_key": "og-api-key-valid", "base_url": url, "limit": 50},
        expected={identifier: entity.created for identifier, entity in everything.items()},
        is_page=lambda request: request.path in ("/v2/alerts", "/v1/incidents"),
        server_error=opsgenie.error(500, "Internal Server Error"),
        # Opsgenie's throttling answer names its window in X-RateLimit-Period-In-Sec, with no Retry-After.
        rate_limited=Reply(
            429,
            json={"message": "You are making too many requests!", "took": 0.001, "requestId": "4f3c7a52-8d6e-4f7c-a1c8-2d0b3f9e6a11"},
            headers={"X-RateLimit-State": "THROTTLED", "X-RateLimit-Reason": "ACCOUNT", "X-RateLimit-Period-In-Sec": "60"},
        ),
        rate_wait=60.0,
        missing_array=Reply(json={"took": 0.01, "requestId": "0b5f3c7a-52d8-4e6f-9c1a-8d2e0b3f9e6b"}),
        refuse_credentials=refuse,
        break_record=broken,
        edit=lambda identifier, title, at: replay.edit(identifier, message=title, at=at),
        edit_target=min(alerts, key=lambda alert: (alert.updated, alert.data["id"])).data["id"],  # on the first page
        title_of=lambda identifier: str(everything[identifier].data["message"]),
        clock=clock,
    )


def sentry_case(shared: Path) -> VendorCase:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    issues = sentry.hadoop_issues(_gitbugs(shared))
    replay = sentry.SentryReplay(issues, clock=clock.now())
    token = next(iter(replay.tokens))

    def refuse() -> None:
        replay.tokens.clear()

    def broken() -> str:
        issue = issues[len(issues) // 2]
        issue.broken = True
        return str(issue.data["id"])

    return VendorCase(
        kind="sentry",
        handler=replay,
        config=lambda url: {"auth_token": token, "organization": sentry.ORG, "base_url": url, "page_size": 50},
        expected={issue.data["id"]: issue.first_seen for issue in issues},
        is_page=lambda request: request.path == f"/api/0/organizations/{sentry.ORG}/issues/",
        server_error=sentry.detail(500, "Internal Error"),
        # Sentry's 429 names no Retry-After: its window resets at X-Sentry-Rate-Limit-Reset (epoch seconds).
        rate_limited=Reply(
            429,
            json={"detail": "You are attempting to use this endpoint too frequently. Limit is 40 requests in 1 seconds"},
            headers={"X-Sentry-Rate-Limit-Limit": "40", "X-Sentry-Rate-Limit-Remaining": "0", "X-Sentry-Rate-Limit-Reset": str(int(clock.epoch()) + 30)},
        ),
        rate_wait=30.0,
        missing_array=Reply(json={"issues": []}),
        refuse_credentials=refuse,
        break_record=broken,
        # Sentry has no update time: an issue first seen within the lookback is read again every pull.
        edit=lambda issue_id, title, at: replay.edit(issue_id, title=title),
        edit_target=max(issues, key=lambda issue: issue.first_seen).data["id"],
        title_of=lambda issue_id: str(replay.issues[issue_id].data["title"]),
        clock=clock,
    )


def incidentio_case(shared: Path) -> VendorCase:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    incidents = incidentio.hadoop_incidents(_gitbugs(shared))
    replay = incidentio.IncidentIoReplay(incidents)

    def refuse() -> None:
        replay.keys.clear()

    def broken() -> str:
        incident = incidents[len(incidents) // 2]
        incident.broken = True
        return str(incident.data["reference"])

    def reported(incident: incidentio.Incident) -> datetime:
        value = incident.data["incident_timestamp_values"][0]["value"]["value"]
        return datetime.fromisoformat(value.replace("Z", "+00:00"))

    return VendorCase(
        kind="incidentio",
        handler=replay,
        config=lambda url: {"api_key": "inc-io-api-key-valid", "base_url": url, "page_size": 25},
        expected={incident.data["reference"]: reported(incident) for incident in incidents},
        is_page=lambda request: request.path == "/v2/incidents",
        server_error=incidentio.problem(500, "api_error", "internal_error", "Something went wrong."),
        # incident.io names its wait only in the body, as the moment in rate_limit.retry_after.
        rate_limited=incidentio.rate_limited(clock.now() + timedelta(seconds=20)),
        rate_wait=20.0,
        missing_array=Reply(json={"pagination_meta": {"page_size": 25}}),
        refuse_credentials=refuse,
        break_record=broken,
        edit=lambda reference, title, at: replay.edit(reference, name=title, at=at),
        edit_target=min(incidents, key=lambda incident: (incident.created, incident.data["id"])).data["reference"],  # on the first page
        title_of=lambda reference: str(replay.by_reference(reference).data["name"]),
        clock=clock,
    )


CASES: dict[str, Callable[[Path], VendorCase]] = {
    "incidentio": incidentio_case,
    "sentry": sentry_case,
    "opsgenie": opsgenie_case,
    "jira": jira_case,
    "github": github_case,
    "pagerduty": pagerduty_case,
    "servicenow": servicenow_case,
}
