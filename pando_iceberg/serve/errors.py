"""The Iceberg REST ``ErrorModel`` (``{"error": {"message", "type", "code"}}``) and the status
each kind of failure answers with.

The ``type`` names are the ones the REST specification and Iceberg Java's server use
(``NoSuchTableException``, ``BadRequestException``, ...): clients map the status code to their
own exception and print ``type: message``."""

from __future__ import annotations

from pyiceberg.catalog.rest.response import ErrorResponse, ErrorResponseMessage
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)

__all__ = ["RestError", "as_rest_error", "error_body"]


class RestError(Exception):
    """A failure answered with ``status`` and the ErrorModel ``{type, message, code}``."""

    def __init__(self, status: int, type_: str, message: str):
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message


def bad_request(message: str) -> RestError:
    return RestError(400, "BadRequestException", message)


def error_body(status: int, type_: str, message: str) -> bytes:
    """The ErrorModel as JSON bytes (pyiceberg's own ``ErrorResponse`` model)."""
    model = ErrorResponse(error=ErrorResponseMessage(message=message, type=type_, code=status))
    return model.model_dump_json().encode()


# pyiceberg's catalog exceptions → (status, the REST type name). Order matters: subclasses first.
_CATALOG_ERRORS: tuple[tuple[type[Exception], int, str], ...] = (
    (NoSuchTableError, 404, "NoSuchTableException"),
    (NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (NoSuchPropertyException, 400, "BadRequestException"),
    (ValidationError, 400, "BadRequestException"),
)


def as_rest_error(e: Exception) -> RestError | None:
    """The RestError a catalog exception stands for; None for anything else (a server error)."""
    if isinstance(e, RestError):
        return e
    for cls, status, type_ in _CATALOG_ERRORS:
        if isinstance(e, cls):
            return RestError(status, type_, str(e) or type(e).__name__)
    return None
