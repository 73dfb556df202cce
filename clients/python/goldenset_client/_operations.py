"""`operation`: one API operation written once for both clients.

An operation is a function that turns a method's arguments into the `Call` to send (no `self`).
Read from a `Client` it is a blocking method answering `T`; read from an `AsyncClient`, a
coroutine function answering `T` once awaited. Each client says how it sends a call (`_bind`);
the operation gives the bound method the build function's name, docstring and parameters, and
the answer's type as its return annotation.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from goldenset_client.routes import Call

if TYPE_CHECKING:
    from goldenset_client.async_client import AsyncClient
    from goldenset_client.client import Client

P = ParamSpec("P")
T = TypeVar("T")


class operation(Generic[P, T]):
    """A method of both clients, from `build(*args, **kwargs) -> Call[T]`."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__name__ = build.__name__
        self.__qualname__ = build.__qualname__
        self.__doc__ = build.__doc__

    def __repr__(self) -> str:
        return f"operation({self.__qualname__})"

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The methods' signature: the build function's parameters, answering the call's model."""
        built = inspect.signature(self.build, eval_str=True)
        (answer,) = typing.get_args(built.return_annotation)
        return built.replace(return_annotation=None if answer is type(None) else answer)

    @overload
    def __get__(self, instance: None, owner: type) -> operation[P, T]: ...
    @overload
    def __get__(self, instance: Client, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, instance: AsyncClient, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, instance: Client | AsyncClient | None, owner: type) -> operation[P, T] | Callable[P, T] | Callable[P, Coroutine[Any, Any, T]]:
        if instance is None:
            return self
        method = instance._bind(self.build)
        functools.update_wrapper(method, self.build)
        signature = self.signature
        method.__signature__ = signature  # type: ignore[union-attr]
        method.__annotations__ = {name: parameter.annotation for name, parameter in signature.parameters.items()} | {"return": signature.return_annotation}
        return method
