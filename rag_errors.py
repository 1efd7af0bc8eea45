"""Typed errors of the service boundary; every one carries the fix a user can apply."""

from __future__ import annotations

from typing import Any


class RagError(Exception):
    code = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — hint: {self.hint}" if self.hint else self.message

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "hint": self.hint}


class InvalidArgument(RagError):
    code = "invalid_argument"


class ConfigError(RagError):
    code = "config_error"


class IndexMissing(RagError):
    code = "index_missing"


class NotFound(RagError):
    code = "not_found"


class SemanticUnavailable(RagError):
    code = "semantic_unavailable"
