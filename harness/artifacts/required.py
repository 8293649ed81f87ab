"""``required`` in tool parameters, at any depth (docs/artifacts.md "Nested objects").

Two spellings, both everywhere a property is declared:

- ``required: true`` / ``false`` on a property (a parameter, or an entry of any
  ``properties`` mapping at any depth) is the flat shorthand: it is lifted out of the
  property into the enclosing object's ``required`` list.
- ``required: [a, b]`` on an object is JSON Schema's own list of its required keys; it
  stays in the schema. Every name must be one of the object's ``properties`` (or of the
  object a ``allOf``/``anyOf``/``oneOf``/``if``/``then``/``else`` branch belongs to),
  unless the object declares other keys welcome (``additionalProperties``,
  ``patternProperties``, ``$ref``).

:func:`lift` rewrites one parameter's schema into plain JSON Schema and says what is
wrong, each finding with the key path to report the file line of.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.artifacts.problems import as_json, json_path, suggest

Finding = tuple[tuple[Any, ...], str, str]  # (key path inside the parameter, code, message)

_MAPS = ("patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTS = ("allOf", "anyOf", "oneOf")
_SCOPED_ONE = ("if", "then", "else", "not")
_ONE = (
    "items",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
OPEN: frozenset[str] = frozenset({"\0open"})  # a scope where any key may be required


def lift(schema: Mapping[str, Any], label: str) -> tuple[dict[str, Any], list[Finding]]:
    """``schema`` (one parameter, its own ``required: bool`` already taken out by the
    caller) with every nested ``required: bool`` lifted, and the findings."""
    found: list[Finding] = []
    out = _Lifter(label, found).node(schema, (), None)
    return out, found


def _types(node: Mapping[str, Any]) -> set[str]:
    t = node.get("type")
    if isinstance(t, str):
        return {t}
    return {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()


def _names(node: Mapping[str, Any]) -> frozenset[str]:
    """The keys ``node`` declares, or :data:`OPEN` when it welcomes others."""
    extra = node.get("additionalProperties")
    if (extra is not None and extra is not False) or "patternProperties" in node or "$ref" in node:
        return OPEN
    props = node.get("properties")
    return frozenset(props) if isinstance(props, Mapping) else frozenset()


class _Lifter:
    def __init__(self, label: str, found: list[Finding]) -> None:
        self.label = label
        self.found = found

    def where(self, path: tuple[Any, ...]) -> str:
        return f"{self.label} at {json_path(path)}" if path else self.label

    def node(self, node: Any, path: tuple[Any, ...], scope: frozenset[str] | None) -> Any:
        """``node`` rewritten; ``scope`` is the names a branch may require (None: not a
        branch of an object schema)."""
        if not isinstance(node, Mapping):
            return node
        out = dict(node)
        own = self.own(out, path)
        names = _names(out)
        if isinstance(out.get("properties"), Mapping):
            self.properties(out, path)
        if isinstance(own, list):
            self.check_list(out, own, path, names, scope)
        inner = names if scope is None or names is OPEN or scope is OPEN else names | scope
        self.children(out, path, inner)
        return out

    def own(self, out: dict[str, Any], path: tuple[Any, ...]) -> Any:
        """``out``'s own ``required`` when it is a list of names; anything else is
        reported and taken out."""
        own = out.get("required")
        if isinstance(own, bool):
            # A property's own flag was taken by its parent: this one is somewhere else.
            self.found.append(
                (
                    (*path, "required"),
                    "parameter-required-invalid",
                    f"{self.where(path)}: `required: {as_json(own)}` only marks a property "
                    "(an entry under `properties`); an object lists its required keys as "
                    "`required: [name, ...]`",
                )
            )
            del out["required"]
        elif own is not None and not (
            isinstance(own, list) and all(isinstance(n, str) for n in own)
        ):
            self.found.append(
                (
                    (*path, "required"),
                    "parameter-required-invalid",
                    f"{self.where(path)} required must be a list of property names "
                    f"(or true/false on a property), got {as_json(own)}",
                )
            )
            del out["required"]
        return out.get("required")

    def children(self, out: dict[str, Any], path: tuple[Any, ...], inner: frozenset[str]) -> None:
        """Rewrite every subschema of ``out`` but its ``properties``."""
        for key in _LISTS:
            if isinstance(out.get(key), list):
                branch = self.branch_scope(out, inner)
                out[key] = [
                    self.node(sub, (*path, key, i), branch) for i, sub in enumerate(out[key])
                ]
        for key in _SCOPED_ONE:
            if key in out:
                out[key] = self.node(out[key], (*path, key), self.branch_scope(out, inner))
        for key in _ONE:
            if key in out:
                out[key] = self.node(out[key], (*path, key), None)
        for key in _MAPS:
            if isinstance(out.get(key), Mapping):
                scoped = inner if key == "dependentSchemas" else None
                out[key] = {
                    name: self.node(sub, (*path, key, name), scoped)
                    for name, sub in out[key].items()
                }

    def properties(self, out: dict[str, Any], path: tuple[Any, ...]) -> None:
        """Lift each property's ``required: bool`` into ``out["required"]``."""
        lifted: list[str] = []
        props: dict[str, Any] = {}
        for name, sub in out["properties"].items():
            at = (*path, "properties", name)
            if isinstance(sub, Mapping) and isinstance(sub.get("required"), bool):
                if sub["required"]:
                    lifted.append(str(name))
                sub = {k: v for k, v in sub.items() if k != "required"}
            props[name] = self.node(sub, at, None)
        out["properties"] = props
        if lifted:
            listed = out.get("required")
            before = listed if isinstance(listed, list) else []
            out["required"] = list(dict.fromkeys([*before, *lifted]))

    def branch_scope(self, out: Mapping[str, Any], inner: frozenset[str]) -> frozenset[str]:
        """What a branch of ``out`` may require: ``out``'s keys and every branch's own."""
        if inner is OPEN:
            return OPEN
        names = set(inner)
        for key in _LISTS:
            for sub in out.get(key) or ():
                if isinstance(sub, Mapping):
                    more = _names(sub)
                    if more is OPEN:
                        return OPEN
                    names |= more
        return frozenset(names)

    def check_list(
        self,
        out: Mapping[str, Any],
        listed: list[str],
        path: tuple[Any, ...],
        names: frozenset[str],
        scope: frozenset[str] | None,
    ) -> None:
        types = _types(out)
        if types and "object" not in types:
            self.found.append(
                (
                    (*path, "required"),
                    "parameter-required-invalid",
                    f"{self.where(path)} is {' or '.join(sorted(types))}, not an object: "
                    "a `required` list names keys of an object; on a property write "
                    "`required: true`",
                )
            )
            return
        if names is OPEN or scope is OPEN:
            return
        known = names | (scope or frozenset())
        for i, name in enumerate(listed):
            if name in known:
                continue
            have = ", ".join(f'"{k}"' for k in sorted(known)) or "none"
            self.found.append(
                (
                    (*path, "required", i),
                    "parameter-required-unknown",
                    f'{self.where(path)} required names "{name}", which is not one of its '
                    f"properties ({have}){suggest(name, sorted(known))}; declare it under "
                    "`properties` or take it out of `required`",
                )
            )
