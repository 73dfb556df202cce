"""Settings from `GOLDENSET_*` environment variables (and a `.env` file), refusing insecure defaults
outside development."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from curation.dedup.rules import DedupConfig

DEVELOPMENT_SECRET_KEY = "goldenset-development-secret-key-do-not-use-in-production"
DEFAULT_DATABASE_URL = "sqlite:///./var/goldenset.db"
ENV_PREFIX = "GOLDENSET_"
MAKE_A_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
logger = logging.getLogger("goldenset.settings")
# What a process does, from the command that started it (docs/deploying.md, "Roles"): `all` is `goldenset
# serve` (the API and the scheduler); `api` is `goldenset serve --no-scheduler` (the API only: no
# embedding model, no curation unless `api_curates`); `worker` is `goldenset scheduler`.
Role = Literal["all", "api", "worker"]
# A rate limit as the `limits` library reads it ("30/minute", "100 per 2 hours"), checked here
# without importing it, so that commands which never serve start quickly.
RATE_LIMIT = re.compile(r"\s*[1-9][0-9]{0,8}\s*(?:/|per)\s*(?:[1-9][0-9]{0,5}\s*)?(?:second|minute|hour|day)s?\s*", re.IGNORECASE)


class Settings(BaseSettings):
    """Runtime configuration. Every field is read from `GOLDENSET_<NAME>`."""

    # A refused value must never be echoed: the message of a failed start ends up in logs and
    # terminals, and the value may be (part of) a secret such as GOLDENSET_ADMIN_TOKEN.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", hide_input_in_errors=True)

    env: Literal["development", "test", "production"] = "development"
    database_url: str = DEFAULT_DATABASE_URL
    secret_key: SecretStr = SecretStr(DEVELOPMENT_SECRET_KEY)
    admin_token: SecretStr | None = None
    max_body_bytes: int = Field(default=10 * 1024 * 1024, gt=0, description="Largest accepted request body (413 above).")
    webhook_tolerance_seconds: int = Field(default=300, gt=0, description="How old a webhook signature timestamp may be.")
    log_level: str = "INFO"
    log_json: bool = True
    otel_enabled: bool = Field(
        default=False,
        description="Send OpenTelemetry traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT and the SDK's other OTEL_* variables); needs `pip install 'goldenset[otel]'`.",
    )
    scheduler_metrics_port: int | None = Field(
        default=None, gt=0, le=65535, description="`goldenset scheduler` serves Prometheus metrics (no token) on this port, all interfaces; unset: none."
    )
    ingest_workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Processes that prepare (map, redact, digest) the records of a large file ingest (`goldenset ingest`, 5,000 records or more) "
        "while the database is written: 0, one per usable core; 1, none.",
    )
    embedding_model: str | None = Field(default=None, description="Path of a sentence-transformers model; default all-MiniLM-L6-v2.")
    embedding_backend: Literal["auto", "torch", "onnx", "onnx-int8", "openvino", "openvino-int8", "http"] = Field(
        default="auto",
        description="Where texts are embedded: `torch` (the model in-process, PyTorch), `onnx` / `onnx-int8` (ONNX Runtime) or `openvino` / `openvino-int8` (OpenVINO), "
        "exported once from the local model (`embedding.backends`), or `http` (an OpenAI-compatible embeddings server, GOLDENSET_EMBEDDING_URL). "
        "`auto`: the backend the database's pool was embedded with, else the faster of `openvino` and `openvino-int8` on this machine (measured once). "
        "Each is its own embedding model: after a change, `goldenset curate --refingerprint`.",
    )
    embedding_max_seq_length: int = Field(default=256, ge=8, le=512, description="Tokens of a text the in-process embedding model reads (the rest is cut); part of the model id.")
    embedding_cache_dir: str = Field(
        default="./var/embedding-models", description="Exported embedding backends are kept here where the model's own folder is not writable (else beside it)."
    )
    embedding_url: str | None = Field(
        default=None, description="`http` backend: base URL of an OpenAI-compatible embeddings server (e.g. http://tei:8080/v1); requests go to <url>/embeddings."
    )
    embedding_endpoint: str | None = Field(
        default=None, description="`http` backend: the model-registry endpoint the server is registered as; it must pass the sealed-run gate's terms conditions."
    )
    embedding_remote_model: str | None = Field(default=None, description="`http` backend: the model name sent in each request.")
    embedding_dim: int | None = Field(default=None, gt=0, le=65536, description="`http` backend: the dimension of the server's vectors; an answer of another is an error.")
    embedding_tokenizer: str | None = Field(
        default=None,
        description="`http` backend: a folder holding the server model's tokenizer.json; the share of each text the model cannot read is measured with it "
        "(unset: not measured, and embeddings decide every text).",
    )
    embedding_api_key: SecretStr | None = Field(default=None, description="`http` backend: sent as `Authorization: Bearer`; never logged.")
    embedding_batch_size: int = Field(default=32, gt=0, le=2048, description="`http` backend: texts per request (TEI refuses more than 32 by default).")
    embedding_concurrency: int = Field(default=4, gt=0, le=64, description="`http` backend: requests in flight at once.")
    embedding_timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="`http` backend: the limit on each request attempt.")
    embedding_max_attempts: int = Field(default=5, gt=0, le=20, description="`http` backend: attempts per request (429, 5xx, timeouts and lost connections are tried again).")
    # Unset thresholds take `curation.dedup.rules.DedupConfig`'s defaults (see `dedup_config`), so a change
    # there changes the default here; reading them lazily keeps the CLI from importing datasketch.
    dedup_minhash_threshold: float | None = Field(default=None, gt=0, le=1, description="Estimated Jaccard for a near-verbatim duplicate; unset: DedupConfig's.")
    dedup_embedding_threshold: float | None = Field(
        default=None, gt=0, le=1, description="Body cosine for a paraphrase of a guarded (exposed, released or reference) item; unset: DedupConfig's."
    )
    dedup_short_embedding_threshold: float | None = Field(default=None, gt=0, le=1, description="The same for a short text; unset: DedupConfig's.")
    dedup_fresh_embedding_threshold: float | None = Field(default=None, gt=0, le=1, description="Body cosine for a paraphrase of a fresh item; unset: DedupConfig's.")
    dedup_fresh_short_embedding_threshold: float | None = Field(default=None, gt=0, le=1, description="The same for a short text; unset: DedupConfig's.")
    dedup_fresh_title_threshold: float | None = Field(default=None, gt=0, le=1, description="Title cosine a paraphrase of a fresh item also needs; unset: DedupConfig's.")
    dedup_confirm_threshold: float | None = Field(
        default=None, ge=0, le=1, description="The same-incident judge's P a paraphrase merge of a fresh item needs, or a curator is asked (0: never); unset: DedupConfig's."
    )
    dedup_ask_threshold: float | None = Field(
        default=None, ge=0, le=1, description="The judge's P from which a unique item near an earlier one is asked of a curator (1: only when certain); unset: DedupConfig's."
    )
    ann_min_items: int = Field(
        default=50_000, ge=1, description="A dedup pool of at least this many embedded items is searched through an approximate (HNSW) index; a smaller one exactly."
    )
    ann_folder: str = Field(default="./var/ann", description="Folder of the approximate index's files (one per database, model and vector kind), memory-mapped by every process.")
    db_pool_size: int = Field(default=10, ge=1, le=1000, description="PostgreSQL: connections each process keeps open (a request holds at most one, while its route runs).")
    db_max_overflow: int = Field(default=10, ge=0, le=1000, description="PostgreSQL: connections a process may open beyond `db_pool_size` when busy.")
    concurrent_requests: int = Field(
        default=10,
        ge=1,
        le=1000,
        description=(
            "Requests a process works on at once; the rest wait their turn in order, neither refused nor timed out. "
            "At most `db_pool_size + db_max_overflow` (each request holds at most one connection); at most `db_pool_size` keeps the pool's connections open and reused."
        ),
    )
    db_pool_timeout: float = Field(
        default=1.0, gt=0, le=60, description="Seconds a request waits for a free database connection before it is answered 503 with Retry-After (the pool is saturated)."
    )
    release_cache_mb: int = Field(
        default=64, ge=0, le=16384, description="Memory per API process for finished dev release answers (item lists and exports), which never change; 0: none."
    )
    curate_interval_seconds: int = Field(default=30, gt=0, description="How often the scheduler curates pending candidates.")
    scale_refit_seconds: int = Field(default=600, gt=0, description="How often the scheduler refits the common scale of evals whose dev runs have newer results.")
    terms_max_age_days: int = Field(default=90, gt=0, description="Sealed runs need endpoint terms checked within this many days.")
    probe_workers: int = Field(default=2, gt=0, le=16, description="Completion probes run at once in the background (each with its own request concurrency).")
    curate_after_ingest: bool = Field(default=True, description="Curate in the background after an API push, webhook or pull (and after `goldenset ingest`).")
    api_curates: bool = Field(
        default=False,
        description="In an API replica (`serve --no-scheduler`): load the embedding model, curate after ingest and answer /v1/dedup/check. "
        "Off: the worker's scheduled curation decides pushed candidates and /v1/dedup/check answers 503.",
    )
    public_api_docs: bool = Field(default=True, description="Serve /docs, /redoc and /openapi.json without a token (they describe the API, never its data).")
    ui_session_hours: int = Field(default=8, gt=0, le=24 * 30, description="How long a web UI sign-in lasts before the person signs in again.")
    sealed_run_read_hours: int = Field(
        default=24, gt=0, le=24 * 30, description="How long the token that started a sealed run may page through its items again; nobody else ever may."
    )
    sign_in_rate_limit: str = Field(
        default="30/minute", description="Sign-in attempts (`POST /ui/login`) one client address may make, as `<count>/<second|minute|hour|day>` (429 above)."
    )
    unauthorized_rate_limit: str = Field(
        default="60/minute",
        description="401 answers one client address may get (wrong, revoked or expired tokens, bad webhook signatures) "
        "before its requests are refused with 429 for the rest of the window.",
    )
    sealed_check_rate_limit: str = Field(
        default="30/hour", description="`/v1/dedup/check` answers matching a sealed item that one token may get before its checks are refused with 429 for the rest of the window."
    )
    trusted_proxies: str = Field(
        default="",
        description="Comma-separated addresses or networks (e.g. 10.0.0.0/8) of reverse proxies whose `X-Forwarded-For` names the client address "
        "that the rate limits count; unset: the peer's address.",
    )

    @field_validator("sign_in_rate_limit", "unauthorized_rate_limit", "sealed_check_rate_limit")
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        if RATE_LIMIT.fullmatch(value) is None:
            raise ValueError("must look like '30/minute' (a count, '/', and second, minute, hour or day)")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        try:
            proxy_networks(value)
        except ValueError as exc:
            raise ValueError("must be comma-separated IP addresses or networks, such as '10.0.0.0/8,192.168.1.5'") from exc
        return value

    @model_validator(mode="after")
    def _refuse_insecure_production(self) -> Settings:
        if self.env != "production":
            return self
        problems = []
        if self.uses_development_secret_key or len(self.secret_key.get_secret_value()) < 32:
            problems.append("GOLDENSET_SECRET_KEY must be set to a random value of at least 32 characters in production")
        if self.admin_token is not None and len(self.admin_token.get_secret_value()) < 32:
            problems.append("GOLDENSET_ADMIN_TOKEN must be at least 32 random characters in production, or unset")
        if problems:
            raise ValueError(f"{'; '.join(problems)} (make a value with `{MAKE_A_KEY}`)")
        return self

    @model_validator(mode="after")
    def _keep_requests_within_the_pool(self) -> Settings:
        if self.concurrent_requests > self.db_pool_size + self.db_max_overflow:
            raise ValueError(
                f"GOLDENSET_CONCURRENT_REQUESTS ({self.concurrent_requests}) is more than the connections a process may open "
                f"(GOLDENSET_DB_POOL_SIZE {self.db_pool_size} + GOLDENSET_DB_MAX_OVERFLOW {self.db_max_overflow}): "
                "requests would wait for a connection and be answered 503; lower it or raise the pool"
            )
        return self

    @model_validator(mode="after")
    def _require_http_embedding_settings(self) -> Settings:
        if self.embedding_backend != "http":
            return self
        needed = ("embedding_url", "embedding_endpoint", "embedding_remote_model", "embedding_dim")
        missing = [f"{ENV_PREFIX}{name.upper()}" for name in needed if not getattr(self, name)]
        if missing:
            raise ValueError(f"GOLDENSET_EMBEDDING_BACKEND=http needs {', '.join(missing)} (see docs/dedup.md, \"Embedding over HTTP\")")
        assert self.embedding_url is not None
        if not self.embedding_url.startswith(("http://", "https://")):
            raise ValueError("GOLDENSET_EMBEDDING_URL must be an http:// or https:// URL")
        return self

    def loads_model(self, role: Role) -> bool:
        """Whether a process of `role` loads the embedding model (and so curates after ingest)."""
        return role != "api" or self.api_curates

    @property
    def uses_development_secret_key(self) -> bool:
        """Whether secrets at rest are encrypted with the built-in key, which anyone with the source has."""
        return self.secret_key.get_secret_value() == DEVELOPMENT_SECRET_KEY

    def dedup_config(self) -> DedupConfig:
        """The dedup thresholds in force: these settings where set, `DedupConfig`'s defaults otherwise."""
        from curation.dedup.rules import DedupConfig

        defaults = DedupConfig()
        return dataclasses.replace(
            defaults,
            minhash_threshold=self.dedup_minhash_threshold or defaults.minhash_threshold,
            guard_embedding_threshold=self.dedup_embedding_threshold or defaults.guard_embedding_threshold,
            guard_short_embedding_threshold=self.dedup_short_embedding_threshold or defaults.guard_short_embedding_threshold,
            fresh_embedding_threshold=self.dedup_fresh_embedding_threshold or defaults.fresh_embedding_threshold,
            fresh_short_embedding_threshold=self.dedup_fresh_short_embedding_threshold or defaults.fresh_short_embedding_threshold,
            fresh_title_threshold=self.dedup_fresh_title_threshold or defaults.fresh_title_threshold,
            confirm_threshold=defaults.confirm_threshold if self.dedup_confirm_threshold is None else self.dedup_confirm_threshold,
            ask_threshold=defaults.ask_threshold if self.dedup_ask_threshold is None else self.dedup_ask_threshold,
            ann=dataclasses.replace(defaults.ann, min_items=self.ann_min_items),
        )


def proxy_networks(value: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The networks of a `GOLDENSET_TRUSTED_PROXIES` value (a single address is a network of one);
    raises ValueError for anything else."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in value.split(",") if part.strip())


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Raises pydantic's ValidationError, which never holds
    the values it refused (see `describe_settings_error`)."""
    return Settings()


def describe_settings_error(error: ValidationError) -> str:
    """One line naming each refused `GOLDENSET_*` variable and what it needs, never its value."""
    problems = []
    for detail in error.errors(include_url=False, include_context=False, include_input=False):
        message = detail["msg"].removeprefix("Value error, ")
        location = detail["loc"]
        # A field's error names the variable; the production check's messages name theirs already.
        problems.append(f"{ENV_PREFIX}{str(location[0]).upper()}: {message}" if location else message)
    return "; ".join(problems) + "; settings are read from GOLDENSET_* environment variables and ./.env"


_development_key_warning = threading.Lock()
_development_key_warned = False


def warn_if_development_secret_key(settings: Settings) -> bool:
    """Log a warning, at most once per process, when `settings` use the built-in development
    secret key (production refuses it; other environments start with it). True when it warned now."""
    global _development_key_warned
    if not settings.uses_development_secret_key:
        return False
    with _development_key_warning:
        if _development_key_warned:
            return False
        _development_key_warned = True
    logger.warning(
        "the built-in development secret key is in use: anyone with goldenset's source can decrypt the webhook and connector secrets stored with it; "
        "set GOLDENSET_SECRET_KEY to at least 32 random characters (make one with `%s`) before storing real credentials",
        MAKE_A_KEY,
    )
    return True
