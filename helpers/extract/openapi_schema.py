"""Local `$ref`s and schemas of an OpenAPI document as readable lines, within a work budget.

A `$ref` is followed only inside the document (`#/components/schemas/Pet`); a reference to
another file or URL is named, never fetched. Chains are cut after MAX_REF_HOPS, a schema that
refers back to one it sits in is named instead of expanded, and every schema node visited is
paid from a `Budget`, so a hostile file (deep, cyclic or fan-out references) costs bounded work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

MAX_REF_HOPS = 16  # a $ref to a $ref ... longer than any real spec's, shorter than a loop's cost
MAX_ITEMS = 60  # properties, enum values, parameters or responses listed per object
MAX_DESCRIPTION_CHARS = 400  # a description longer than this is cut (the schema section has it)
# Schemas nested inside one another (inline or through refs) followed at most this deep, whatever
# the depth asked: `allOf` and array items keep their parent's level, so they count here.
MAX_NESTING = 12
_COMPOSITIONS = (("allOf", "all of"), ("oneOf", "one of"), ("anyOf", "any of"))
_CONSTRAINTS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "default",
)


class Budget:
    """Schema lines a render may still write (a schema visited costs one too); when it runs out,
    schemas are named, not expanded."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.granted = nodes

    def take(self) -> bool:
        self.nodes -= 1
        return self.nodes >= 0

    def share(self, nodes: int) -> Budget:
        """A budget of at most `nodes` out of this one; `settle` pays back what it used."""
        return Budget(max(0, min(nodes, self.nodes)))

    def settle(self, part: Budget) -> None:
        self.nodes -= part.granted - max(part.nodes, 0)


@dataclass(frozen=True)
class Target:
    """What a `$ref` chain ends at: the object (None when unresolved) and the last ref's name."""

    value: Any
    name: str | None
    ref: str | None


class Refs:
    """Resolves local JSON pointers of one document; each distinct `$ref` is resolved once (a
    spec names the same schema from hundreds of places)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._targets: dict[str, Target] = {}
        self._pointers: dict[str, Any] = {}

    def follow(self, value: Any) -> Target:
        if not isinstance(value, dict) or "$ref" not in value:
            return Target(value, None, None)
        first = str(value["$ref"])
        target = self._targets.get(first)
        if target is None:
            target = self._targets[first] = self._chain(first)
        return target

    def _chain(self, ref: str) -> Target:
        seen: set[str] = set()
        value: Any = {"$ref": ref}
        name: str | None = None
        for _ in range(MAX_REF_HOPS):
            if not isinstance(value, dict) or "$ref" not in value:
                return Target(value, name, ref)
            ref = str(value["$ref"])
            name = ref.rsplit("/", 1)[-1] or ref
            if not ref.startswith("#") or ref in seen:
                return Target(None, name, ref)  # another file or URL, or a loop: named only
            seen.add(ref)
            value = self._pointer(ref[1:])
        return Target(None, name, ref)

    def _pointer(self, pointer: str) -> Any:
        if pointer in self._pointers:
            return self._pointers[pointer]
        node: Any = self.root
        for raw in pointer.split("/")[1:] if pointer else []:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part, node.get(int(part)) if part.isdigit() else None)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
                break
        self._pointers[pointer] = node
        return node


def mapping(value: Any) -> dict[Any, Any]:
    """`value` when it is a mapping, else an empty one (a spec's field of the wrong type)."""
    return value if isinstance(value, dict) else {}


def short(text: Any, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """One line of at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def schema_lines(
    schema: Any,
    refs: Refs,
    budget: Budget,
    depth: int,
    indent: str = "",
    chain: tuple[str | None, ...] = (),
) -> list[str]:
    """The properties (and alternatives) of `schema` as bullet lines, `depth` levels deep."""
    target = refs.follow(schema)
    value = target.value
    if (
        depth <= 0
        or len(chain) >= MAX_NESTING
        or not isinstance(value, dict)
        or (target.ref is not None and target.ref in chain)
        or not budget.take()
    ):
        return []
    chain = (*chain, target.ref)
    lines: list[str] = []
    names = value.get("required")
    required = (
        {str(r) for r in names if isinstance(r, str | int)} if isinstance(names, list) else set()
    )
    properties = value.get("properties")
    if isinstance(properties, dict):
        for index, (key, prop) in enumerate(properties.items()):
            if index >= MAX_ITEMS or not budget.take():
                lines.append(f"{indent}- … {len(properties) - index} more properties")
                break
            flag = ", required" if str(key) in required else ""
            lines.append(f"{indent}- {key} ({summary(prop, refs)}{flag}){_described(prop, refs)}")
            lines += schema_lines(_inner(prop, refs), refs, budget, depth - 1, indent + "  ", chain)
    items = value.get("items")
    if items is not None and not isinstance(properties, dict):
        lines += schema_lines(items, refs, budget, depth, indent, chain)
    for key, label in _COMPOSITIONS:
        parts = value.get(key)
        if not isinstance(parts, list):
            continue
        for part in parts[:MAX_ITEMS]:
            if not budget.take():
                break
            if key == "allOf":  # the members' properties are the schema's own
                lines += schema_lines(part, refs, budget, depth, indent, chain)
            else:
                lines.append(f"{indent}- {label}: {summary(part, refs)}{_described(part, refs)}")
                lines += schema_lines(part, refs, budget, depth - 1, indent + "  ", chain)
    extra = value.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        lines.append(f"{indent}- any other key ({summary(extra, refs)})")
    return lines


def summary(schema: Any, refs: Refs, nesting: int = 0) -> str:
    """One line naming the type: `Pet`, `array of Pet`, `string, date-time, enum: a, b`."""
    target = refs.follow(schema)
    value = target.value
    if not isinstance(value, dict) or nesting >= MAX_NESTING:
        return target.name or "any"
    parts: list[str] = [target.name] if target.name else []
    kind = value.get("type")
    kind = "/".join(map(str, kind)) if isinstance(kind, list) else kind
    if kind == "array":
        parts.append(f"array of {summary(value.get('items'), refs, nesting + 1)}")
    elif kind is not None and not (target.name and kind == "object"):
        parts.append(str(kind))
    if value.get("format"):
        parts.append(str(value["format"]))
    for key, label in _COMPOSITIONS:
        members = value.get(key)
        if isinstance(members, list) and members and not target.name:
            names = [refs.follow(m).name or "inline schema" for m in members[:MAX_ITEMS]]
            parts.append(f"{label}: {' | '.join(names)}")
    enum = value.get("enum")
    if isinstance(enum, list) and enum:
        shown = ", ".join(short(v, 60) for v in enum[:MAX_ITEMS])
        parts.append(f"enum: {shown}{', …' if len(enum) > MAX_ITEMS else ''}")
    parts += [f"{key} {short(value[key], 80)}" for key in _CONSTRAINTS if key in value]
    if value.get("nullable"):
        parts.append("nullable")
    if value.get("deprecated"):
        parts.append("deprecated")
    return ", ".join(parts) or "any"


def _described(schema: Any, refs: Refs) -> str:
    """`: description` of an inline schema (a named one is described in its own section)."""
    if isinstance(schema, dict) and "$ref" in schema:
        return ""
    value = refs.follow(schema).value
    if isinstance(value, dict) and value.get("description"):
        return ": " + short(value["description"])
    return ""


def _inner(schema: Any, refs: Refs) -> Any:
    """The schema whose properties describe a property's value (an array's items)."""
    value = refs.follow(schema).value
    if isinstance(value, dict) and value.get("type") == "array" and "items" in value:
        return value["items"]
    return schema
