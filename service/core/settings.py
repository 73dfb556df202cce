"""Settings from `GOLDENSET_*` environment variables (and a `.env` file), refusing insecure defaults
outside development."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from curation.dedup.deduplicator import DedupConfig

DEVELOPMENT_SECRET_KEY = "goldenset-development-secret-key-do-not-use-in-production"
DEFAULT_DATABASE_URL = "sqlite:///./var/goldenset.db"


class Settings(BaseSettings):
    """Runtime configuration. Every field is read from `GOLDENSET_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="GOLDENSET_", env_file=".env", extra="ignore")

    env: Literal["development", "test", "production"] = "development"
    database_url: str = DEFAULT_DATABASE_URL
    secret_key: SecretStr = SecretStr(DEVELOPMENT_SECRET_KEY)
    admin_token: SecretStr | None = None
    max_body_bytes: int = Field(default=10 * 1024 * 1024, gt=0, description="Largest accepted request body (413 above).")
    webhook_tolerance_seconds: int = Field(default=300, gt=0, description="How old a webhook signature timestamp may be.")
    log_level: str = "INFO"
    log_json: bool = True
    embedding_model: str | None = Field(default=None, description="Path of a sentence-transformers model; default all-MiniLM-L6-v2.")
    # Unset thresholds take `curation.dedup.deduplicator.DedupConfig`'s defaults (see `dedup_config`), so a change
    # there changes the default here; reading them lazily keeps the CLI from importing datasketch.
    dedup_minhash_threshold: float | None = Field(default=None, gt=0, le=1, description="Estimated Jaccard for a near-verbatim duplicate; unset: DedupConfig's.")
    dedup_embedding_threshold: float | None = Field(default=None, gt=0, le=1, description="Embedding score for a paraphrase; unset: DedupConfig's.")
    dedup_short_embedding_threshold: float | None = Field(default=None, gt=0, le=1, description="Embedding score for a paraphrase of a short text; unset: DedupConfig's.")
    curate_interval_seconds: int = Field(default=30, gt=0, description="How often the scheduler curates pending candidates.")
    terms_max_age_days: int = Field(default=90, gt=0, description="Sealed runs need endpoint terms checked within this many days.")
    probe_workers: int = Field(default=2, gt=0, le=16, description="Completion probes run at once in the background (each with its own request concurrency).")
    curate_after_ingest: bool = Field(default=True, description="Curate in the background after an API push, webhook or pull (and after `goldenset ingest`).")

    @model_validator(mode="after")
    def _refuse_insecure_production(self) -> Settings:
        if self.env == "production":
            if self.secret_key.get_secret_value() == DEVELOPMENT_SECRET_KEY or len(self.secret_key.get_secret_value()) < 32:
                raise ValueError("GOLDENSET_SECRET_KEY must be set to a random value of at least 32 characters in production")
            if self.admin_token is not None and len(self.admin_token.get_secret_value()) < 32:
                raise ValueError("GOLDENSET_ADMIN_TOKEN must be at least 32 characters in production")
        return self

    def dedup_config(self) -> DedupConfig:
        """The dedup thresholds in force: these settings where set, `DedupConfig`'s defaults otherwise."""
        from curation.dedup.deduplicator import DedupConfig

        defaults = DedupConfig()
        return dataclasses.replace(
            defaults,
            minhash_threshold=defaults.minhash_threshold if self.dedup_minhash_threshold is None else self.dedup_minhash_threshold,
            embedding_threshold=defaults.embedding_threshold if self.dedup_embedding_threshold is None else self.dedup_embedding_threshold,
            short_embedding_threshold=defaults.short_embedding_threshold if self.dedup_short_embedding_threshold is None else self.dedup_short_embedding_threshold,
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
