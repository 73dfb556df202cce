"""Data contracts: the SQLModel tables and the pydantic API models, one family per entity
(`XBase`, `X(table=True)`, `XCreate`, `XRead`), and the column types they share.

Owns: every table and every request and response shape (sources, items, dedup state, evals,
releases, the model registry, runs and the ledger, probes, evidence reports, tokens, audit
events, problems), and `common.read_model`, the one way a row becomes the API model showing it.
May use: nothing else of goldenset (the flow starts here).
"""

from schemas.audit import AuditEvent
from schemas.corpus_results import CorpusResult
from schemas.dedup import DedupDecision, DedupOverride, Embedding, ItemFingerprint, NearLink
from schemas.dedup_questions import DedupQuestion
from schemas.evals import Eval, EvalItem
from schemas.item import Item, ItemRead, ItemRevision, ItemStatus
from schemas.model_registry import Endpoint, Model
from schemas.probes import Probe
from schemas.release import Release, ReleaseItem, SealedRead
from schemas.runs import Result, Run, RunItem
from schemas.scale import ScaleFit
from schemas.source import Source, SourceKind, WebhookDelivery
from schemas.team_review import ReviewClaim, ReviewVote
from schemas.token import ApiToken, Scope, UiSession

__all__ = [
    "ApiToken",
    "AuditEvent",
    "CorpusResult",
    "DedupDecision",
    "DedupOverride",
    "DedupQuestion",
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
    "NearLink",
    "Probe",
    "Release",
    "ReleaseItem",
    "Result",
    "ReviewClaim",
    "ReviewVote",
    "Run",
    "RunItem",
    "ScaleFit",
    "Scope",
    "SealedRead",
    "Source",
    "SourceKind",
    "UiSession",
    "WebhookDelivery",
]
