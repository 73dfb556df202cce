"""goldenset's Python client: every REST operation of the API as a typed method, sync (`Client`)
and async (`AsyncClient`), with retries that honour the server's `Retry-After`, cursors hidden
behind iterators, the JSONL export streamed row by row, and refusals raised as typed errors.

    from goldenset_client import Client, ResultIn

    with Client.from_env() as client:  # GOLDENSET_URL, GOLDENSET_TOKEN
        run = client.start_run("ops", model="acme-1", endpoint="acme-1-zdr")
        results = [ResultIn(item_id=item.item_id, score=grade(item.content)) for item in client.iter_run_items(run.id)]
        client.post_results(run.id, results)
        print(client.get_run(run.id).score)
"""

from goldenset_client._config import __version__
from goldenset_client.async_client import AsyncClient
from goldenset_client.client import Client
from goldenset_client.errors import (
    Conflict,
    Forbidden,
    GoldensetError,
    GoldensetUnavailable,
    InvalidRequest,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
)
from goldenset_client.models import (
    DedupCheck,
    EndpointCreate,
    EndpointUpdate,
    EvalCreate,
    EvalUpdate,
    ExportRow,
    ItemEdit,
    ModelCreate,
    ModelUpdate,
    ProbeCreate,
    ResultIn,
    ReviewDecision,
    SourceCreate,
    SourceUpdate,
)
from goldenset_client.retry import RetryPolicy

__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "DedupCheck",
    "EndpointCreate",
    "EndpointUpdate",
    "EvalCreate",
    "EvalUpdate",
    "ExportRow",
    "Forbidden",
    "GoldensetError",
    "GoldensetUnavailable",
    "InvalidRequest",
    "ItemEdit",
    "ModelCreate",
    "ModelUpdate",
    "NotFound",
    "ProbeCreate",
    "RateLimited",
    "ResultIn",
    "RetryPolicy",
    "ReviewDecision",
    "ServerError",
    "SourceCreate",
    "SourceUpdate",
    "Unauthorized",
    "__version__",
]
