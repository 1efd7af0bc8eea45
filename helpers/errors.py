"""The one error base: a stable `code`, the `message` in plain words and a `hint` with the fix.

It lives in helpers/ so that extractors, OCR and the semantic model files (which may not import
top-level modules) raise the same class the service and every face report; `rag_errors`
re-exports it. A face shows `str(exc)` or `to_dict()` and never a Python exception type name.
"""

from __future__ import annotations

from typing import Any


class RagError(Exception):
    """Base of every error a user can see; subclasses set `code` (the console and MCP keep it)."""

    code = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — hint: {self.hint}" if self.hint else self.message

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "hint": self.hint}

    def tool_text(self) -> str:
        """One line for a text-only channel (an MCP tool error): `[code] message — hint: …`."""
        return f"[{self.code}] {self}"
