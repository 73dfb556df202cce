"""The model registry: models under evaluation and the endpoints that serve them, with each
endpoint's data-retention terms (does the provider train on what is sent to it?)."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Self

import pydantic
from pydantic import BaseModel, StrictBool, field_validator
from sqlalchemy import Column, Date, String, Text
from sqlmodel import Field, SQLModel

from schemas.common import Count, Day, Instant, UTCDateTime, json_column_type, utcnow

NAME_PATTERN = r"^[a-z0-9][a-z0-9._:/-]{0,127}$"
NAME_HELP = "Lowercase letters, digits, '.', '_', ':', '/' and '-' (e.g. 'gpt-4o-2024-08-06' or 'acme/llama-3-8b')."


class TrainsOnInputs(StrEnum):
    """Whether the provider may train on what is sent to the endpoint, per its terms. `unknown`
    counts as `yes` everywhere it matters: items sent there are exposed, and sealed runs refused."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


class Augmentation(StrEnum):
    """What an endpoint adds to the bare model: anything that lets it look beyond its own weights.
    A completion probe or a temporal split then measures the augmentation, not the training data."""

    RETRIEVAL = "retrieval"
    WEB_SEARCH = "web_search"
    TOOLS = "tools"
    OTHER = "other"


class LogprobSupport(StrEnum):
    """How an endpoint gives log-probabilities, which decides the membership tests a probe can run.

    `none`: it gives none (or it is not known). `completions_echo`: an OpenAI-compatible
    `/completions` with `echo` and `logprobs` scores the prompt's own tokens (vLLM; OpenAI's legacy
    completion models). `tgi_prefill`: text-generation-inference's `/generate` with
    `decoder_input_details` does (TGI). `chat`: only chat `logprobs`, for the tokens the model
    writes (llama.cpp's server, OpenAI's chat models, vLLM's chat route): not enough to score an
    item's own text, recorded so a probe can say why it used the completion test.
    """

    NONE = "none"
    COMPLETIONS_ECHO = "completions_echo"
    TGI_PREFILL = "tgi_prefill"
    CHAT = "chat"

    @property
    def scores_prompts(self) -> bool:
        """Whether the endpoint gives log-probabilities of a text it is sent."""
        return self in (LogprobSupport.COMPLETIONS_ECHO, LogprobSupport.TGI_PREFILL)


class Model(SQLModel, table=True):
    """A model under evaluation. `training_cutoff` is the date its training data ends, as its
    provider states it: items that occurred after it cannot have been trained on."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128, sa_column_kwargs={"unique": True}, index=True)
    provider: str = Field(default="", max_length=128)
    training_cutoff: date | None = Field(default=None, sa_type=Date)
    release_date: date | None = Field(default=None, sa_type=Date)
    notes: str = Field(default="", sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Endpoint(SQLModel, table=True):
    """Where a model is called: a base URL of a provider, and the provider's data-retention terms
    for it as last checked (`terms_checked_at`, by `checked_by`)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128, sa_column_kwargs={"unique": True}, index=True)
    base_url: str = Field(max_length=2048)
    provider: str = Field(default="", max_length=128)
    model_id: int = Field(foreign_key="model.id", index=True)
    trains_on_inputs: str = Field(default=TrainsOnInputs.UNKNOWN.value, sa_type=String(8))
    retention_days: int | None = None
    terms_url: str = Field(default="", max_length=2048)
    terms_checked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    checked_by: str = Field(default="", max_length=160)
    # Whether the model behind the endpoint has retrieval, web search or tools (`augmentations`
    # says which): probes refuse such an endpoint, and temporal splits over its runs warn.
    augmented: bool = False
    augmentations: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    logprobs: str = Field(default=LogprobSupport.NONE.value, sa_type=String(24))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


URL_PATTERN = r"^https?://"
"""What an endpoint's URLs begin with, as the OpenAPI document states it (the validator says so in words)."""
OPTIONAL_URL_PATTERN = r"^(https?://|(?![\s\S]))"
"""An endpoint's URL or nothing. The empty text is matched as the end of the input, not by `$`,
which Python lets match before a final newline."""


AUGMENTED_HELP = (
    "Whether the model behind this endpoint has retrieval, web search or tools (default false: the bare model). "
    "Completion probes refuse an augmented endpoint, and temporal-split reports warn about runs through one."
)
LOGPROBS_HELP = (
    "How the endpoint gives log-probabilities (default none): completions_echo (OpenAI-compatible /completions with echo and "
    "logprobs: vLLM, OpenAI's legacy completion models), tgi_prefill (TGI's /generate with decoder_input_details), chat (chat "
    "logprobs for written tokens only: llama.cpp, OpenAI chat models). The first two let probes run the log-probability tests."
)


class _EndpointInput(BaseModel):
    # `augmented: false` with augmentations named is refused; the document says so.
    model_config = pydantic.ConfigDict(
        json_schema_extra={"not": {"required": ["augmented", "augmentations"], "properties": {"augmented": {"const": False}, "augmentations": {"type": "array", "minItems": 1}}}}
    )

    @field_validator("base_url", "terms_url", check_fields=False)
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @pydantic.model_validator(mode="after")
    def _augmented_agrees(self) -> Self:
        augmented: bool | None = getattr(self, "augmented", None)
        augmentations: list[Augmentation] | None = getattr(self, "augmentations", None)
        if augmented is False and augmentations:
            raise ValueError(f"augmented is false but augmentations names {', '.join(a.value for a in augmentations)}; an endpoint with any of them is augmented")
        return self


class ModelCreate(BaseModel):
    """`POST /v1/models`."""

    name: str = pydantic.Field(pattern=NAME_PATTERN, description=NAME_HELP)
    provider: str = pydantic.Field(default="", max_length=128)
    training_cutoff: Day | None = pydantic.Field(default=None, description="The date the model's training data ends, as its provider states it.")
    release_date: Day | None = None
    notes: str = ""


class ModelUpdate(BaseModel):
    """`PATCH /v1/models/{name}`: the fields to change."""

    provider: str | None = pydantic.Field(default=None, max_length=128)
    training_cutoff: Day | None = None
    release_date: Day | None = None
    notes: str | None = None


class ModelRead(BaseModel):
    id: int
    name: str
    provider: str
    training_cutoff: date | None
    release_date: date | None
    notes: str
    created_at: datetime
    updated_at: datetime


class EndpointCreate(_EndpointInput):
    """`POST /v1/endpoints`. Terms default to `unknown`, which exposes every item sent there.
    `terms_checked_at` defaults to now when `trains_on_inputs` is given as yes or no; `checked_by`
    to the calling token."""

    name: str = pydantic.Field(pattern=NAME_PATTERN, description=NAME_HELP)
    base_url: str = pydantic.Field(max_length=2048, json_schema_extra={"pattern": URL_PATTERN}, description="An http:// or https:// URL.")
    provider: str = pydantic.Field(default="", max_length=128)
    model: str = pydantic.Field(description="The registered model this endpoint serves.")
    trains_on_inputs: TrainsOnInputs = TrainsOnInputs.UNKNOWN
    retention_days: Count | None = None
    terms_url: str = pydantic.Field(default="", max_length=2048, json_schema_extra={"pattern": OPTIONAL_URL_PATTERN}, description="An http:// or https:// URL, or empty.")
    terms_checked_at: Instant | None = None
    checked_by: str | None = pydantic.Field(default=None, max_length=160)
    augmented: StrictBool | None = pydantic.Field(default=None, description=AUGMENTED_HELP + " Naming augmentations implies true.")
    augmentations: list[Augmentation] = pydantic.Field(default_factory=list, description="Which: retrieval, web_search, tools, other.")
    logprobs: LogprobSupport = pydantic.Field(default=LogprobSupport.NONE, description=LOGPROBS_HELP)


class EndpointUpdate(_EndpointInput):
    """`PATCH /v1/endpoints/{name}`: the fields to change. Changing the terms without giving
    `terms_checked_at` records them as checked now, by the calling token."""

    base_url: str | None = pydantic.Field(default=None, max_length=2048, json_schema_extra={"pattern": URL_PATTERN}, description="An http:// or https:// URL.")
    provider: str | None = pydantic.Field(default=None, max_length=128)
    model: str | None = None
    trains_on_inputs: TrainsOnInputs | None = None
    retention_days: Count | None = None
    terms_url: str | None = pydantic.Field(default=None, max_length=2048, json_schema_extra={"pattern": OPTIONAL_URL_PATTERN}, description="An http:// or https:// URL, or empty.")
    terms_checked_at: Instant | None = None
    checked_by: str | None = pydantic.Field(default=None, max_length=160)
    augmented: StrictBool | None = pydantic.Field(default=None, description=AUGMENTED_HELP + " Naming augmentations implies true; false clears them.")
    augmentations: list[Augmentation] | None = pydantic.Field(default=None, description="Which: retrieval, web_search, tools, other.")
    logprobs: LogprobSupport | None = pydantic.Field(default=None, description=LOGPROBS_HELP)


class EndpointRead(BaseModel):
    """An endpoint with its terms; `terms_age_days` is how long ago they were checked (null:
    never), `sealed_allowed` whether a sealed run may go there now (terms permitting), `logprobs`
    how it gives log-probabilities (`LogprobSupport`)."""

    id: int
    name: str
    base_url: str
    provider: str
    model: str
    trains_on_inputs: TrainsOnInputs
    retention_days: int | None
    terms_url: str
    terms_checked_at: datetime | None
    checked_by: str
    terms_age_days: int | None
    sealed_allowed: bool
    augmented: bool
    augmentations: list[Augmentation]
    logprobs: LogprobSupport
    created_at: datetime
    updated_at: datetime
