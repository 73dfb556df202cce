"""Secrets at rest: values encrypted with a key derived from `GOLDENSET_SECRET_KEY` (Fernet)."""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken


def _fernet(secret_key: str) -> Fernet:
    derived = hashlib.sha256(b"goldenset-at-rest\x00" + secret_key.encode("utf-8")).digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(value: str, *, secret_key: str) -> str:
    """Encrypt `value` for storage."""
    return _fernet(secret_key).encrypt(value.encode("utf-8")).decode("ascii")


def decrypt(token: str, *, secret_key: str) -> str:
    """Decrypt a stored value; raises ValueError if the secret key changed or the value was altered."""
    try:
        return _fernet(secret_key).decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken as exc:
        raise ValueError("stored secret cannot be decrypted: was GOLDENSET_SECRET_KEY changed?") from exc


def new_secret(prefix: str = "") -> str:
    """A fresh random secret (256 bits, URL-safe)."""
    return prefix + secrets.token_urlsafe(32)


def sha256_hex(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()
