"""Typed MCP outputs: pydantic models built from the shape table in helpers.results, so clients
get an outputSchema that cannot drift from what the faces send.

Each model has its shape's keys in order with their wire types and descriptions; the keys every
response carries are required, the others default to null (or to their shape's empty value),
and `extra="forbid"` rejects a key the shape does not know. A field the response left out (a
compact hit's abs_path, say) is left out of the structured content too, not sent as null."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic import create_model as _create_model

from helpers import results as shapes


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _only_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Serialise the keys the response carried, nothing the model would add."""
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}


def _field(key: shapes.Key, required: bool) -> tuple[str, Any]:
    if required:
        return key.type, Field(description=key.about)
    if key.empty is not None:
        return key.type, Field(default_factory=key.empty, description=key.about)
    return key.type, Field(default=None, description=key.about)


def _camel(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


def _model(shape: shapes.Shape, built: dict[str, type[_Out]]) -> type[_Out]:
    """The shape's model, named like the shape (`hit` -> HitOut); the nested shapes its types
    name ("list[Hit]") are the models already `built`."""
    always = shape.always()
    fields = {key.name: _field(key, key.name in always) for key in shape.fields}
    model = _create_model(  # type: ignore[call-overload]
        _camel(shape.name) + "Out", __base__=_Out, __module__=__name__, **fields
    )
    nested = {_camel(name): out for name, out in built.items()}
    model.model_rebuild(_types_namespace={"Any": Any, **nested})
    return model


# Models in dependency order (a nested shape before the shape that holds it).
_BUILT: dict[str, type[_Out]] = {}
for _shape in (
    shapes.CHANNEL_RANK,
    shapes.HIT,
    shapes.SOURCE,
    shapes.OMITTED,
    shapes.SEARCH,
    shapes.JOB_ERROR,
    shapes.JOB,
    shapes.DOCUMENT,
    shapes.LIST,
    shapes.SECTION,
    shapes.READ,
    shapes.DISK,
    shapes.HEALTH,
):
    _BUILT[_shape.name] = _model(_shape, _BUILT)

ChannelRankOut = _BUILT["channel_rank"]
HitOut = _BUILT["hit"]
SourceOut = _BUILT["source"]
OmittedOut = _BUILT["omitted"]
SearchOut = _BUILT["search"]
JobErrorOut = _BUILT["job_error"]
JobOut = _BUILT["job"]
DocumentOut = _BUILT["document"]
ListOut = _BUILT["list"]
SectionOut = _BUILT["section"]
ReadOut = _BUILT["read"]
DiskOut = _BUILT["disk"]
HealthOut = _BUILT["health"]
MODELS: tuple[tuple[type[_Out], shapes.Shape], ...] = tuple(
    (_BUILT[name], shapes.SHAPES[name]) for name in _BUILT
)


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's outputSchema: the validation schema (required keys, additionalProperties
    false). The serialization schema would be empty: _Out's serializer returns a plain dict."""
    return model.model_json_schema(mode="validation")
