"""`goldenset source configure`: change a source as `PATCH /v1/sources/{name}` does (its connector
settings and credentials, mapping, pull interval, enabled flag, cursor), on the database or over
the API (--url), and print what changed.

Connector settings change key by key (`connector_settings`): what the command does not name,
credentials included, stays as stored. Credentials are write-only: they are taken from a file, a
`--set`, or a hidden prompt (`--set KEY=-`), and never printed: a changed one shows as
`set (not shown)`. A change the connector refuses (an unknown key, a bad value) changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError

from ingest.connectors.base import ConfigError
from ingest.mapping import MappingError, load_mapping
from schemas.source import SourceRead, SourceUpdate
from schemas.validation import describe_errors
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, err, fail, open_engine, out

MASK = "***"
"""How a stored credential shows in a source's `config` (`ingest.connectors.base.ConnectorConfig.masked`)."""
PROMPT = "-"
"""`--set KEY=-`: ask for the value with hidden input instead of taking it from the command line."""


def source_configure(
    name: Annotated[str, typer.Argument(help="The source to change.")],
    connector: Annotated[
        Path | None, typer.Option("--connector", help="YAML or JSON file of connector settings to change (credentials included); keys it leaves out keep their values.")
    ] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE: one connector setting (repeat). KEY=- asks for the value with hidden input. [a, b] or {k: v} is read as YAML."),
    ] = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="KEY: put a connector setting back to its default (repeat).")] = None,
    enabled: Annotated[bool | None, typer.Option("--enable/--disable", help="Let the scheduler and `goldenset pull` pull the source, or stop them.", show_default=False)] = None,
    reset_cursor: Annotated[bool, typer.Option("--reset-cursor", help="Forget the cursor: the next pull starts from the beginning.")] = False,
    interval: Annotated[int | None, typer.Option("--interval", help="Pull every N seconds; 0: manual pulls only.", min=0)] = None,
    mapping: Annotated[Path | None, typer.Option("--mapping", help="Mapping file (YAML or JSON) replacing the stored one.")] = None,
) -> None:
    """Change a source's connector settings and credentials, mapping, pull interval or enabled flag,
    or reset its cursor, as PATCH /v1/sources/{name} does (over the API with --url, an admin
    token), and print what changed; credentials are never printed. A new credential clears
    `auth_failed`.

    Exit status: 0 when changed, 2 when there is no such source or the change is refused (an
    unknown key, a bad value: nothing is changed)."""
    update = _update(connector=connector, settings=settings or [], unset=unset or [], enabled=enabled, reset_cursor=reset_cursor, interval=interval, mapping=mapping)
    named = set(update.connector_settings or {})
    with remote_client() as client:
        if client is not None:
            from goldenset_client.models import SourceUpdate as RemoteUpdate

            before = SourceRead.model_validate(client.get_source(name).model_dump(mode="json"))
            answer = client.update_source(name, RemoteUpdate(**update.model_dump(mode="json", exclude_unset=True)))
            after = SourceRead.model_validate(answer.model_dump(mode="json"))
            _print_changes(name, describe_changes(before, after, named=named, cursor_reset=reset_cursor))
            return
    from service.sources.definitions import read_source, require_source, update_source

    with write_transaction(open_engine()) as session:
        try:
            source = require_source(session=session, name=name)
            before = SourceRead.model_validate(read_source(session=session, source=source).model_dump(mode="json"))
            update_source(session=session, source=source, data=update, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR)
            session.flush()
            after = read_source(session=session, source=source)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        except (ConfigError, MappingError) as exc:
            raise fail(f"{exc}; source {name!r} was not changed") from exc
    _print_changes(name, describe_changes(before, after, named=named, cursor_reset=reset_cursor))


def _update(
    *, connector: Path | None, settings: list[str], unset: list[str], enabled: bool | None, reset_cursor: bool, interval: int | None, mapping: Path | None
) -> SourceUpdate:
    """The PATCH body the options ask for; bad usage ends the command (exit 2) before anything is sent."""
    fields: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    if connector is not None:
        changes.update(_read_settings(connector))
    for text in settings:
        key, value = _setting(text)
        changes[key] = value
    set_keys = {text.partition("=")[0].strip() for text in settings}
    for key in (key.strip() for key in unset):
        if key in set_keys:
            raise fail(f"--set and --unset both name {key!r}; name it once")
        changes[key] = None
    if changes:
        fields["connector_settings"] = changes
    if enabled is not None:
        fields["enabled"] = enabled
    if reset_cursor:
        fields["reset_cursor"] = True
    if interval is not None:
        fields["pull_interval_seconds"] = interval or None
    if mapping is not None:
        try:
            fields["mapping"] = load_mapping(mapping).model_dump(mode="json", exclude_defaults=True)
        except (MappingError, OSError, ValueError) as exc:
            raise fail(str(exc)) from exc
    if not fields:
        raise fail("nothing to change: give --connector FILE, --set KEY=VALUE, --unset KEY, --enable/--disable, --reset-cursor, --interval or --mapping")
    try:
        return SourceUpdate.model_validate(fields)
    except ValidationError as exc:
        raise fail("; ".join(describe_errors(exc, SourceUpdate))) from exc


def _read_settings(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise fail(f"{path} is not YAML or JSON: {exc}") from exc
    if not isinstance(document, dict) or not all(isinstance(key, str) for key in document):
        raise fail(f"{path} must hold an object of connector settings (key: value)")
    return document


def _setting(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` as a key and its value: the text as written, a YAML list or object when in
    brackets or braces, or what the hidden prompt reads for `-`. A bad one is named by its key,
    never by its value (it may be a credential)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise fail(f"--set takes KEY=VALUE{f' (got {key!r} without a value)' if key and not sep else ''}")
    if value == PROMPT:
        return key, typer.prompt(key, hide_input=True, err=True)
    if value.strip()[:1] in ("[", "{"):
        try:
            return key, yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise fail(f"--set {key}: a value in brackets or braces must be a YAML list or object") from exc
    return key, value


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def describe_changes(before: SourceRead, after: SourceRead, *, named: set[str], cursor_reset: bool) -> list[str]:
    """One line per thing that changed between two reads of a source. A credential (masked in
    both) shows as `set (not shown)` when the change named it, `removed` when it went."""
    lines: list[str] = []
    for key in sorted(set(before.config) | set(after.config) | named):
        old, new = before.config.get(key), after.config.get(key)
        if MASK in (old, new):
            if new == MASK and key in named:
                lines.append(f"{key}: set (not shown)")
            elif new != MASK:
                lines.append(f"{key}: removed")
        elif old != new:
            lines.append(f"{key}: {_shown(old)} → {_shown(new)}")
    if before.mapping != after.mapping:
        lines.append("mapping: replaced" if after.mapping is not None else "mapping: removed (the connector's default applies)")
    if before.pull_interval_seconds != after.pull_interval_seconds:
        lines.append(f"pull interval: {_interval(before.pull_interval_seconds)} → {_interval(after.pull_interval_seconds)}")
    if before.enabled != after.enabled:
        lines.append("enabled" if after.enabled else "disabled")
    if cursor_reset:
        lines.append("cursor: reset (the next pull starts from the beginning)" if before.cursor is not None else "cursor: none was stored")
    if before.status != after.status:
        lines.append(f"status: {before.status} → {after.status}")
    return lines


def _interval(seconds: int | None) -> str:
    return f"every {seconds} s" if seconds else "manual pulls only"


def _print_changes(name: str, lines: list[str]) -> None:
    if not lines:
        err.print(f"source {name}: nothing changed", highlight=False)
        return
    out.print(f"source {name} changed:", highlight=False)
    for line in lines:
        out.print(f"  {line}", highlight=False)
