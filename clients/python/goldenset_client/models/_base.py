"""The two kinds of model: what the server answers, and what the client sends."""

from pydantic import BaseModel, ConfigDict


class _Response(BaseModel):
    """A body the server sends. Members this client does not know are ignored, so a newer server
    does not break an older client; a missing required member is a validation error."""

    model_config = ConfigDict(extra="ignore")


class _Request(BaseModel):
    """A body the client sends. Unknown members are refused here, before anything is sent; only
    the fields given to the constructor are sent (the server fills in its defaults)."""

    model_config = ConfigDict(extra="forbid")
