"""Data contracts: SQLModel tables and pydantic API models. Imports nothing else of goldenset."""

from schemas.audit import AuditEvent
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.item import Item, ItemRead, ItemRevision, ItemStatus
from schemas.source import Source, SourceKind
from schemas.token import ApiToken, Scope

__all__ = ["ApiToken", "AuditEvent", "DedupDecision", "Embedding", "Item", "ItemFingerprint", "ItemRead", "ItemRevision", "ItemStatus", "Scope", "Source", "SourceKind"]
