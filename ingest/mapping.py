"""Declarative field mapping: how a source's raw records become items.

A mapping is a YAML or JSON document. `external_id`, `occurred_at` and `tags` name fields (dot
paths such as `fields.created`); `title`, `input` and `reference` are either a field path or a
Jinja2 template over the record (anything containing `{{` or `{%`), e.g.
`"{{ vendorProject }} {{ product }}: {{ shortDescription }}"`. A field missing from a template
renders empty; list the fields that must be present in `required`. `metadata` keeps fields as
they are (a list of paths, or a `{name: path}` table). `version` (a path or template, optional)
gives the source's own updated time or version number of a record, which keeps an older event
from overwriting a newer one (see `ingest.versions`). See `examples/mappings/` for real ones.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import ChainableUndefined, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ingest.dates import IncidentDateError, parse_incident_date
from ingest.redaction.redactor import RedactionPolicy
from ingest.versions import VersionError, canonical_version
from schemas.validation import describe_errors

MAX_EXTERNAL_ID_LENGTH = 255
_MISSING = object()
_TEMPLATE_MARKERS = ("{{", "{%")

_jinja = SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=False)
# What a template sees for a JSON null: nothing, as for a missing field. Printed, joined or
# concatenated it is empty (never the word `None`), it is false in `{% if %}`, and `| default(...)`
# replaces it.
_NULL = ChainableUndefined(hint="a null field")


def _nulls_as_missing(value: object) -> object:
    """`value` with every None (at any depth of its dicts and lists) replaced by `_NULL`."""
    if value is None:
        return _NULL
    if isinstance(value, AbcMapping):
        return {key: _nulls_as_missing(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_nulls_as_missing(item) for item in value]
    return value


class MappingError(ValueError):
    """The mapping document itself is invalid; the message names the field and the fix."""


class RecordRejected(ValueError):
    """One record cannot be mapped. `reason` is a short code (`missing_field`, `bad_date`, ...)."""

    def __init__(self, reason: str, detail: str, external_id: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.external_id = external_id

    def __reduce__(self) -> tuple[type[RecordRejected], tuple[str, str, str | None]]:
        # Rebuilt whole when it crosses to or from a worker process (`ingest.preparing`).
        return (RecordRejected, (self.reason, self.detail, self.external_id))


def _is_template(spec: str) -> bool:
    return any(marker in spec for marker in _TEMPLATE_MARKERS)


class Mapping(BaseModel):
    """The declarative mapping of one source (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["jsonl", "csv", "json"] | None = Field(default=None, description="Default file format.")
    records: str | None = Field(default=None, description="Dot path to the array of records in a JSON document.")
    external_id: str = "external_id"
    occurred_at: str = "occurred_at"
    title: str = "title"
    input: str = "input"
    reference: str = "reference"
    version: str | None = Field(default=None, description="The record's own updated time or version (a path or template); an older one never overwrites a newer.")
    metadata: list[str] | dict[str, str] = Field(default_factory=list)
    metadata_object: str | None = Field(default=None, description="A field holding an object merged into metadata.")
    tags: str | None = None
    required: list[str] = Field(default_factory=list)
    distinct_by: list[str] = Field(default_factory=list, description="Identity fields that keep records apart.")
    redact: RedactionPolicy = Field(default_factory=RedactionPolicy)

    @field_validator("title", "input", "reference", "version")
    @classmethod
    def _template_compiles(cls, value: str | None) -> str | None:
        if value is not None and _is_template(value):
            try:
                _jinja.parse(value)
            except TemplateSyntaxError as exc:
                raise ValueError(f"template does not compile: {exc.message} (line {exc.lineno})") from exc
        return value

    @field_validator("external_id", "occurred_at", "input")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a field or hold a template")
        return value

    @field_validator("version")
    @classmethod
    def _version_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must name a field or hold a template, or be left out")
        return value

    def metadata_fields(self) -> dict[str, str]:
        """Metadata as `{name: path}`."""
        if isinstance(self.metadata, dict):
            return dict(self.metadata)
        return {path: path for path in self.metadata}


NATIVE_MAPPING = Mapping(metadata_object="metadata", tags="tags")
"""The mapping of a source that has none: records already in goldenset's item shape
(`external_id`, `occurred_at`, `title`, `input`, `reference`, `metadata`, `tags`)."""


def load_mapping(path: Path) -> Mapping:
    """Read a mapping from a YAML or JSON file, raising `MappingError` that names the bad field."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MappingError(f"cannot read mapping {path}: {exc.strerror}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise MappingError(f"mapping {path} is not valid YAML or JSON: {exc}") from exc
    return parse_mapping(document, origin=str(path))


def parse_mapping(document: object, *, origin: str = "mapping") -> Mapping:
    """Validate a mapping document (already parsed), raising `MappingError` that names the bad field."""
    if not isinstance(document, dict):
        raise MappingError(f"{origin} must be an object of fields, got {type(document).__name__}")
    try:
        return Mapping.model_validate(document)
    except ValidationError as exc:
        raise MappingError(f"{origin} is invalid: {'; '.join(describe_errors(exc, Mapping))}") from exc


def resolve_path(record: object, path: str) -> object:
    """The value at dot path `path` in `record`, or the module's `_MISSING` sentinel.

    A key that itself contains dots is found whole before the path is split.
    """
    if isinstance(record, AbcMapping) and path in record:
        return record[path]
    current: object = record
    for part in path.split("."):
        if isinstance(current, AbcMapping):
            if part not in current:
                return _MISSING
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def is_missing(value: object) -> bool:
    return value is _MISSING or value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class MappedRecord:
    """A record in item shape, before redaction and storage."""

    external_id: str
    occurred_at: datetime
    title: str
    input: str
    reference: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    identity: str | None = None
    version: str | None = None
    """The canonical text of the record's version (see `ingest.versions`), None when it has none."""


class CompiledMapping:
    """A mapping with its templates compiled once, applied record by record."""

    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping
        self._text_fields = {name: self._compile(getattr(mapping, name)) for name in ("title", "input", "reference")}
        self._version_template = self._compile(mapping.version) if mapping.version else None
        self._metadata_fields = mapping.metadata_fields()

    @staticmethod
    def _compile(spec: str) -> Any:
        return _jinja.from_string(spec) if _is_template(spec) else None

    def apply(self, record: object, *, now: datetime | None = None) -> MappedRecord:
        """Map one raw record; raises `RecordRejected` naming the field and the problem."""
        if not isinstance(record, AbcMapping):
            raise RecordRejected("wrong_type", f"expected an object (a JSON object or CSV row), got {type(record).__name__}")
        external_id = self._external_id(record)
        try:
            for path in self.mapping.required:
                if is_missing(resolve_path(record, path)):
                    raise RecordRejected("missing_field", f"required field {path!r} is missing or empty")
            raw_date = resolve_path(record, self.mapping.occurred_at)
            if raw_date is _MISSING:
                raise RecordRejected("missing_field", f"date field {self.mapping.occurred_at!r} is missing")
            try:
                occurred_at = parse_incident_date(raw_date, now=now)
            except IncidentDateError as exc:
                raise RecordRejected("bad_date", f"field {self.mapping.occurred_at!r}: {exc}") from exc
            title = self._text(record, "title")
            input_text = self._text(record, "input")
            if not input_text.strip():
                raise RecordRejected("empty_input", f"input {self.mapping.input!r} rendered empty: the fields it uses are missing")
            return MappedRecord(
                external_id=external_id,
                occurred_at=occurred_at,
                title=title,
                input=input_text,
                reference=self._text(record, "reference"),
                metadata=self._metadata(record),
                tags=self._tags(record),
                identity=self._identity(record),
                version=self._version(record),
            )
        except RecordRejected as exc:
            exc.external_id = external_id
            raise

    def external_id_of(self, record: object) -> str | None:
        """The record's external id, or None when it has no readable one (to name a rejected record)."""
        if not isinstance(record, AbcMapping):
            return None
        try:
            return self._external_id(record)
        except RecordRejected:
            return None

    def _external_id(self, record: AbcMapping[str, object]) -> str:
        value = resolve_path(record, self.mapping.external_id)
        if is_missing(value):
            raise RecordRejected("missing_field", f"id field {self.mapping.external_id!r} is missing or empty")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise RecordRejected("wrong_type", f"id field {self.mapping.external_id!r} must be a string or integer, got {type(value).__name__}")
        text = str(value).strip()
        if len(text) > MAX_EXTERNAL_ID_LENGTH:
            raise RecordRejected("wrong_type", f"id field {self.mapping.external_id!r} is longer than {MAX_EXTERNAL_ID_LENGTH} characters")
        return text

    @staticmethod
    def _render(template: Any, record: AbcMapping[str, object], name: str) -> str:
        values = _nulls_as_missing(record)
        assert isinstance(values, dict)
        try:
            return str(template.render({**{str(k): v for k, v in values.items()}, "record": values})).strip()
        except (TemplateError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError) as exc:
            raise RecordRejected("template_error", f"{name} template failed on this record: {exc}") from exc

    def _text(self, record: AbcMapping[str, object], name: str) -> str:
        template = self._text_fields[name]
        spec: str = getattr(self.mapping, name)
        if template is not None:
            return self._render(template, record, name)
        value = resolve_path(record, spec)
        if value is _MISSING or value is None:
            return ""
        if isinstance(value, dict | list):
            raise RecordRejected("wrong_type", f"field {spec!r} ({name}) must be text, got {type(value).__name__}")
        return str(value).strip()

    def _version(self, record: AbcMapping[str, object]) -> str | None:
        """The record's version as canonical text; None when the mapping has none or the record
        leaves it empty (such a record applies as before versions existed)."""
        if self.mapping.version is None:
            return None
        value = self._render(self._version_template, record, "version") if self._version_template is not None else resolve_path(record, self.mapping.version)
        try:
            return canonical_version(None if value is _MISSING else value)
        except VersionError as exc:
            raise RecordRejected("bad_version", f"version {self.mapping.version!r}: {exc}") from exc

    def _identity(self, record: AbcMapping[str, object]) -> str | None:
        """The record's identity under `distinct_by` (None when the mapping declares none): records
        with different identities are never duplicates of each other, whatever their text."""
        if not self.mapping.distinct_by:
            return None
        values = [resolve_path(record, path) for path in self.mapping.distinct_by]
        if all(is_missing(value) for value in values):
            return None
        return "|".join("" if is_missing(value) else str(value).strip() for value in values)[:255]

    def _metadata(self, record: AbcMapping[str, object]) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        if self.mapping.metadata_object:
            value = resolve_path(record, self.mapping.metadata_object)
            if isinstance(value, AbcMapping):
                metadata.update(value)
            elif not is_missing(value):
                raise RecordRejected("wrong_type", f"field {self.mapping.metadata_object!r} (metadata) must be an object, got {type(value).__name__}")
        for name, path in self._metadata_fields.items():
            value = resolve_path(record, path)
            if value is not _MISSING:
                metadata[name] = value
        return metadata

    def _tags(self, record: AbcMapping[str, object]) -> list[str]:
        if not self.mapping.tags:
            return []
        value = resolve_path(record, self.mapping.tags)
        if is_missing(value):
            return []
        if isinstance(value, str):
            parts = value.split(",")
        elif isinstance(value, list) and all(isinstance(part, str | int) and not isinstance(part, bool) for part in value):
            parts = [str(part) for part in value]
        else:
            raise RecordRejected("wrong_type", f"field {self.mapping.tags!r} (tags) must be a list of strings or a comma-separated string")
        return sorted({part.strip() for part in parts if part.strip()})
