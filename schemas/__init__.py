"""Data contracts: SQLModel tables and pydantic API models. Imports nothing else of goldenset."""

from schemas.audit import AuditEvent
from schemas.corpus_results import CorpusResult
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.evals import Eval, EvalItem
from schemas.item import Item, ItemRead, ItemRevision, ItemStatus
from schemas.model_registry import Endpoint, Model
from schemas.probes import Probe
from schemas.release import Release, ReleaseItem, SealedRead
from schemas.runs import Result, Run, RunItem
from schemas.source import Source, SourceKind
from schemas.token import ApiToken, Scope

__all__ = [
    "ApiToken",
    "AuditEvent",
    "CorpusResult",
    "DedupDecision",
    "Embedding",
    "Endpoint",
    "Eval",
    "EvalItem",
    "Item",
    "ItemFingerprint",
    "ItemRead",
    "ItemRevision",
    "ItemStatus",
    "Model",
    "Probe",
    "Release",
    "ReleaseItem",
    "Result",
    "Run",
    "RunItem",
    "Scope",
    "SealedRead",
    "Source",
    "SourceKind",
]
