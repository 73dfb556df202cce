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
    from curation.dedup.rules import DedupConfig

    assert Settings().dedup_config() == DedupConfig()
    custom = Settings(dedup_minhash_threshold=0.9, dedup_embedding_threshold=0.85).dedup_config()
    assert (custom.minhash_threshold, custom.guard_embedding_threshold, custom.neighbours) == (0.9, 0.85, DedupConfig().neighbours)
    with pytest.raises(ValidationError):
        Settings(dedup_embedding_threshold=1.5)


def test_refused_settings_never_echo_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from service.core.settings import describe_settings_error

    monkeypatch.setenv("GOLDENSET_ENV", "production")
    monkeypatch.setenv("GOLDENSET_ADMIN_TOKEN", "adm-7Qz-short")
    monkeypatch.setenv("GOLDENSET_MAX_BODY_BYTES", "body-9Kw-secret")
    with pytest.raises(ValidationError) as refused:
        Settings()
    shown = [str(refused.value), repr(refused.value), describe_settings_error(refused.value)]
    assert not any(fragment in text for text in shown for fragment in ("7Qz", "short", "9Kw", "body-"))
    assert describe_settings_error(refused.value).startswith("GOLDENSET_MAX_BODY_BYTES: Input should be a valid integer")
    monkeypatch.setenv("GOLDENSET_MAX_BODY_BYTES", "2048")
    with pytest.raises(ValidationError) as refused:
        Settings()
    message = describe_settings_error(refused.value)
    assert "GOLDENSET_SECRET_KEY must be set" in message and "GOLDENSET_ADMIN_TOKEN must be at least 32" in message and "secrets.token_urlsafe" in message
    assert "\n" not in message and "7Qz" not in message


def test_the_development_key_is_warned_about_once_per_process(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from service.core import settings as settings_module

    monkeypatch.setattr(settings_module, "_development_key_warned", False)
    with caplog.at_level("WARNING", logger="goldenset.settings"):
        assert settings_module.warn_if_development_secret_key(Settings(secret_key="k" * 40)) is False
        assert settings_module.warn_if_development_secret_key(Settings()) is True
        assert settings_module.warn_if_development_secret_key(Settings()) is False
    warnings = [record for record in caplog.records if record.name == "goldenset.settings"]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert "development secret key is in use" in warnings[0].getMessage() and "set GOLDENSET_SECRET_KEY" in warnings[0].getMessage()


def test_more_concurrent_requests_than_connections_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match=r"GOLDENSET_CONCURRENT_REQUESTS \(21\) is more than .*POOL_SIZE 10 \+ GOLDENSET_DB_MAX_OVERFLOW 10"):
        Settings(concurrent_requests=21)
    assert Settings(concurrent_requests=20, db_pool_size=10, db_max_overflow=10).concurrent_requests == 20
    assert Settings().concurrent_requests == Settings().db_pool_size
