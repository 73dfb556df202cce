import pytest
from pydantic import ValidationError

from service.core.settings import Settings


def test_production_refuses_the_development_secret_key() -> None:
    with pytest.raises(ValidationError, match="GOLDENSET_SECRET_KEY"):
        Settings(env="production")


def test_production_refuses_a_short_admin_token() -> None:
    with pytest.raises(ValidationError, match="GOLDENSET_ADMIN_TOKEN"):
        Settings(env="production", secret_key="x" * 40, admin_token="short")


def test_settings_come_from_goldenset_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("GOLDENSET_MAX_BODY_BYTES", "2048")
    settings = Settings()
    assert settings.database_url == "postgresql://u@h/db"
    assert settings.max_body_bytes == 2048
    assert "x" * 8 not in repr(Settings(secret_key="x" * 40))


def test_dedup_thresholds_default_to_the_engines() -> None:
    from curation.dedup.deduplicator import DedupConfig

    assert Settings().dedup_config() == DedupConfig()
    custom = Settings(dedup_minhash_threshold=0.9, dedup_embedding_threshold=0.85).dedup_config()
    assert (custom.minhash_threshold, custom.embedding_threshold, custom.neighbours) == (0.9, 0.85, DedupConfig().neighbours)
    with pytest.raises(ValidationError):
        Settings(dedup_embedding_threshold=1.5)
