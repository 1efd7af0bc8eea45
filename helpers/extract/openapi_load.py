"""Loading an OpenAPI / Swagger document from text, with the line span of each key near the top.

YAML goes through PyYAML's safe constructor (standard types only: a tag that would build an
object fails the load) on libyaml's event parser where it is installed, composed by PyYAML's
own Python composer: that one stops a deep nesting with RecursionError where the C composer
overflows the stack. Before anything is constructed the node graph is measured as the tree it
expands to: alias and merge-key bombs (a few KB that expand to billions of nodes) and recursive
anchors are refused, and the file is then read as plain text. JSON goes through `json.loads`;
its key lines come from a scan of the string and bracket tokens (the parser keeps no positions).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

try:  # libyaml's event parser where PyYAML was built with it (its wheels are)
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    CParser = None

# Aliases may add this many nodes to the tree a file expands to: anchors reused for shared
# parameters stay far below it, a "billion laughs" file far above.
MAX_ALIAS_EXPANSION = 1_000_000
# Key spans are kept down to this depth (paths > /owners > post > responses).
SPAN_DEPTH = 4
# A key's value opens before this many characters per line on average: below it the file has
# lines worth citing (minified JSON is one line, cited as no line at all).
MINIFIED_LINE_CHARS = 200
_JSON_KEY = re.compile(r'"(?:openapi|swagger)"\s*:')
_YAML_KEY = re.compile(r"""(?m)^[{\s]*["']?(?:openapi|swagger)["']?\s*:""")
# A JSON string (escapes included) or one structural character: all the key scan needs.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]')

Spans = dict[tuple[str, ...], tuple[int, int]]


@dataclass(frozen=True)
class LoadedSpec:
    """The parsed document and the 1-based line span of each key path up to SPAN_DEPTH."""

    data: dict[str, Any]
    spans: Spans = field(default_factory=dict)


def is_spec(data: Any) -> bool:
    """A top-level `openapi: 3.x` or `swagger: 2.0` key: the spec's own declaration."""
    if not isinstance(data, dict):
        return False
    version = data.get("openapi")
    if version is not None:
        return str(version).startswith("3")
    return str(data.get("swagger", "")).startswith("2")


def load_yaml_spec(text: str) -> LoadedSpec | None:
    """The spec in YAML text, or None (not a spec, not safe YAML, or over the alias bound)."""
    if not _YAML_KEY.search(text):
        return None
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None or not isinstance(node, MappingNode) or not _bounded(node):
            return None
        data = loader.construct_document(node)
        if not is_spec(data):
            return None
        spans: Spans = {}
        _node_spans(node, (), spans, text)
        return LoadedSpec(data, spans)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None  # broken or hostile YAML is still text worth indexing
    finally:
        loader.dispose()


def load_json_spec(text: str) -> LoadedSpec | None:
    """The spec in JSON text, or None; key spans only when the file is not minified."""
    if not _JSON_KEY.search(text):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not is_spec(data):
        return None
    lines = text.count("\n") + 1
    if len(text) / lines >= MINIFIED_LINE_CHARS:
        return LoadedSpec(data)
    return LoadedSpec(data, _json_spans(text))


if CParser is not None:

    class _BoundedLoader(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """Events from libyaml, composed in Python (bounded by the recursion limit), safe types."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

else:  # pragma: no cover - PyYAML without libyaml: its pure-Python safe loader

    class _BoundedLoader(yaml.SafeLoader):  # type: ignore[no-redef]
        """PyYAML's own safe loader, Python throughout."""


def _bounded(root: Node) -> bool:
    """False when the tree `root` expands to (aliases and merges included) exceeds the distinct
    nodes by more than MAX_ALIAS_EXPANSION, or loops back on itself (a recursive anchor)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # (node, its children once expanded): children are summed when the node is met again.
    stack: list[tuple[Node, list[Node] | None]] = [(root, None)]
    while stack:
        node, children = stack[-1]
        key = id(node)
        if children is not None:
            stack.pop()
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > len(sizes) + MAX_ALIAS_EXPANSION:
                return False
        elif key in sizes:
            stack.pop()
        elif key in on_path:
            return False
        elif isinstance(node, ScalarNode):
            stack.pop()
            sizes[key] = 1
        else:
            on_path.add(key)
            children = _children(node)
            stack[-1] = (node, children)
            stack.extend((child, None) for child in children if id(child) not in sizes)
    return True


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _node_spans(node: MappingNode, path: tuple[str, ...], spans: Spans, text: str) -> None:
    for key, value in node.value:
        if not isinstance(key, ScalarNode) or key.value == "<<":
            continue
        here = (*path, str(key.value))
        end = value.end_mark
        # A block value ends where the next key starts: with only indentation before that point
        # on its line, the value's last line is the one before (0-based end.line, 1-based).
        ended_before = not text[end.index - end.column : end.index].strip()
        spans[here] = (key.start_mark.line + 1, end.line if ended_before else end.line + 1)
        if len(here) < SPAN_DEPTH and isinstance(value, MappingNode):
            _node_spans(value, here, spans, text)


def _json_spans(text: str) -> Spans:
    """Line spans of object keys down to SPAN_DEPTH; keys inside arrays are not kept."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    spans: Spans = {}
    # One frame per open container: (is_object, the open key and where its value starts).
    frames: list[list[Any]] = []
    pending: re.Match[str] | None = None  # a string that becomes a key if ':' follows

    def close(frame: list[Any], end: int) -> None:
        if frame[1] is None:
            return
        keys = [f[1] for f in frames]
        if all(k is not None for k in keys) and len(keys) <= SPAN_DEPTH:
            start_line = bisect.bisect_right(newlines, frame[2]) + 1
            spans[tuple(keys)] = (start_line, bisect.bisect_right(newlines, end) + 1)
        frame[1] = None

    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            pending = match
            continue
        if token == ":" and pending is not None and frames and frames[-1][0]:
            depth_ok = len(frames) <= SPAN_DEPTH
            frames[-1][1] = json.loads(pending.group()) if depth_ok else ""
            frames[-1][2] = pending.start()
        elif token in "{[":
            frames.append([token == "{", None, 0])
        elif token in "}]" and frames:
            close(frames[-1], match.start())
            frames.pop()
        elif token == "," and frames:
            close(frames[-1], match.start())
        pending = None
    return spans
