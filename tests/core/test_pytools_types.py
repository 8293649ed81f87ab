"""Python tools are first-class (issue 25 item 8): dataclass, TypedDict and pydantic
parameters and returns as JSON Schema and back, descriptions from ``Annotated`` and
docstrings, provider names mapped back to tools."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import jsonschema
import pydantic
import pytest

import harness
from harness.errors import UsageError

MakeHarness = Callable[..., harness.Harness]


@dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: float
    y: float = 0.0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Shape:
    name: Annotated[str, "What the shape is called"]
    corners: list[Point]
    color: Color = Color.RED
    tags: set[str] = field(default_factory=set, metadata={"description": "Free labels"})
    note: str | None = None


class Box(TypedDict):
    width: int
    height: int
    origin: NotRequired[Point]


class Address(pydantic.BaseModel):
    street: str
    city: str = pydantic.Field(description="City name")


class Person(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)
    home: Address


@dataclass
class Node:
    value: int
    children: list[Node]


SEEN: list[Any] = []


def test_dataclass_parameters_become_objects_and_come_back_as_instances(
    make_harness: MakeHarness,
) -> None:
    h = make_harness()

    @h.tool
    def area(shape: Shape, scale: float = 1.0) -> Point:
        """Bounding box corner of a shape."""
        SEEN.append(shape)
        return Point(x=max(p.x for p in shape.corners) * scale, y=2)

    spec = h.tools["area"]
    shape = spec.input_schema["properties"]["shape"]
    assert shape["type"] == "object" and shape["title"] == "Shape"
    assert shape["required"] == ["name", "corners"]
    assert shape["additionalProperties"] is False
    props = shape["properties"]
    assert props["name"] == {"type": "string", "description": "What the shape is called"}
    corner = props["corners"]["items"]
    assert corner["properties"]["x"] == {"type": "number", "description": "Horizontal position."}
    assert corner["required"] == ["x"]
    assert corner["description"] == "A point on the plane."
    assert props["color"] == {"type": "string", "enum": ["red", "blue"], "default": "red"}
    assert props["tags"]["uniqueItems"] is True
    assert props["tags"]["description"] == "Free labels"
    assert props["note"]["type"] == ["string", "null"]
    assert spec.returns is not None and spec.returns["required"] == ["x"]
    jsonschema.Draft202012Validator.check_schema(dict(spec.input_schema))

    result = h.call(
        "area",
        {"shape": {"name": "tri", "corners": [{"x": 1}, {"x": 4, "y": 2}], "color": "blue"}},
    )
    assert not result.is_error, result.text
    assert result.value == {"x": 4, "y": 2}
    got = SEEN[-1]
    assert isinstance(got, Shape) and isinstance(got.corners[1], Point)
    assert got.color is Color.BLUE and got.tags == set()

    bad = h.call("area", {"shape": {"name": "tri", "corners": [{"y": 1}], "sides": 3}})
    assert bad.is_error
    assert '$.shape.corners[0].x: "x" is a required property' in bad.text
    assert "$.shape: Additional properties are not allowed" in bad.text


def test_typeddict_and_containers(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def measure(box: Box, sizes: dict[str, Point], pair: tuple[int, str]) -> Box:
        """Measure a box."""
        SEEN.append((box, sizes, pair))
        return box

    schema = h.tools["measure"].input_schema["properties"]
    assert schema["box"]["required"] == ["width", "height"]
    assert "additionalProperties" not in schema["box"]  # a TypedDict allows other keys
    assert schema["sizes"]["additionalProperties"]["title"] == "Point"
    assert schema["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    result = h.call(
        "measure",
        {
            "box": {"width": 2, "height": 3, "origin": {"x": 1}},
            "sizes": {"a": {"x": 5}},
            "pair": [1, "a"],
        },
    )
    assert not result.is_error, result.text
    box, sizes, pair = SEEN[-1]
    assert type(box) is dict and box["origin"] == Point(1)
    assert sizes == {"a": Point(5)} and pair == (1, "a")
    assert result.value == {"width": 2, "height": 3, "origin": {"x": 1, "y": 0.0}}


def test_pydantic_models_use_their_own_schema(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def greet(person: Person, others: list[Person] | None = None) -> Person:
        """Greet a person."""
        SEEN.append(person)
        return person.model_copy(update={"name": person.name.upper()})

    spec = h.tools["greet"]
    person = spec.input_schema["properties"]["person"]
    own = Person.model_json_schema()
    assert person == {k: v for k, v in own.items() if k != "$defs"}
    assert spec.input_schema["$defs"] == own["$defs"]  # "#/$defs/Address" resolves at the root
    assert spec.returns is not None and "$defs" in spec.returns
    ok = h.call(
        "greet", {"person": {"name": "ada", "age": 36, "home": {"street": "s", "city": "c"}}}
    )
    assert not ok.is_error, ok.text
    assert isinstance(SEEN[-1], Person) and isinstance(SEEN[-1].home, Address)
    assert ok.value == {"name": "ADA", "age": 36, "home": {"street": "s", "city": "c"}}
    bad = h.call("greet", {"person": {"name": "ada", "age": -1, "home": {"street": "s"}}})
    assert bad.is_error
    assert "$.person.age: -1 is less than the minimum of 0" in bad.text
    assert '$.person.home.city: "city" is a required property' in bad.text
    for fmt in ("openai", "openai-strict", "anthropic", "mcp"):
        (definition,) = h.definitions(format=fmt, names=["greet"])
        text = json.dumps(definition)
        assert "Address" in text, fmt


def test_descriptions_from_annotated_and_docstrings(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def google(a: int, b: Annotated[int, "wins over the docstring"], c: str = "x") -> int:
        """Add numbers.

        Args:
            a (int): The first
                number, on two lines.
            b: Ignored: Annotated gives b's description.
            c: A label.

        Returns:
            The sum.
        """
        return a + b

    @h.tool
    def numpy_style(a: int, b: int) -> int:
        """Subtract numbers.

        Parameters
        ----------
        a : int
            The minuend.
        b : int
            The subtrahend.

        Returns
        -------
        int
        """
        return a - b

    @h.tool
    def sphinx(a: int, b: int) -> int:
        """Multiply numbers.

        :param a: The multiplicand.
        :param int b: The multiplier,
            continued.
        :type a: int
        :returns: the product
        """
        return a * b

    @h.tool
    def with_field(n: Annotated[int, pydantic.Field(description="From a pydantic Field")]) -> int:
        return n

    def desc(tool: str, name: str) -> str:
        return str(h.tools[tool].input_schema["properties"][name].get("description"))

    assert desc("google", "a") == "The first number, on two lines."
    assert desc("google", "b") == "wins over the docstring"
    assert desc("google", "c") == "A label."
    assert h.tools["google"].description == "Add numbers.\n\nReturns:\n    The sum."
    assert (
        desc("numpy_style", "a") == "The minuend." and desc("numpy_style", "b") == "The subtrahend."
    )
    assert "Parameters" not in h.tools["numpy_style"].description
    assert h.tools["numpy_style"].description.startswith("Subtract numbers.\n\nReturns")
    assert desc("sphinx", "a") == "The multiplicand."
    assert desc("sphinx", "b") == "The multiplier, continued."
    assert h.tools["sphinx"].description == "Multiply numbers.\n\n:returns: the product"
    assert desc("with_field", "n") == "From a pydantic Field"
    assert h.tools["with_field"].parameters[0].description == "From a pydantic Field"


def test_unusable_types_are_refused_with_the_tool_and_parameter(make_harness: MakeHarness) -> None:
    h = make_harness()
    with pytest.raises(UsageError, match=r'tool "walk" parameter "tree": .*recursive type Node'):

        @h.tool
        def walk(tree: Node) -> int:
            return 0

    with pytest.raises(UsageError, match=r'parameter "p": cannot turn type hint .*Path'):

        @h.tool
        def open_it(p: Path) -> str:
            return ""


def test_optional_without_a_default_is_passed_as_none(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def maybe(p: Point | None, n: int) -> str:
        return repr(p)

    assert h.tools["maybe"].input_schema["required"] == ["n"]
    assert h.call("maybe", {"n": 1}).value == "None"
    assert h.call("maybe", {"n": 1, "p": {"x": 2}}).value == "Point(x=2, y=0.0)"


def test_async_tools_return_json_too(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    async def later(x: float) -> Point:
        return Point(x=x)

    assert h.call("later", {"x": 1.5}).value == {"x": 1.5, "y": 0.0}


def test_provider_names_map_back_to_tools(make_harness: MakeHarness) -> None:
    guard = """
    ---
    event: tool.pre
    when: payload["name"] == "math.div"
    script: |
      def handle(event, payload):
          if payload["arguments"]["b"] == 0:
              return block("no division by zero")
    ---
    """
    h = make_harness(hooks={"guard": guard})

    @h.tool(name="math.div")
    def div(a: float, b: float) -> float:
        """Divide."""
        return a / b

    (definition,) = h.definitions(format="openai", names=["math.div"])
    exported = definition["function"]["name"]
    assert exported == "math_div"
    assert h.resolve_provider_name("math_div") == "math.div"
    assert h.resolve_provider_name("math.div") == "math.div"
    with pytest.raises(UsageError, match=r'unknown tool "math_dvi".*did you mean'):
        h.resolve_provider_name("math_dvi")
    result = h.call(exported, {"a": 6, "b": 3})
    assert (result.name, result.value) == ("math.div", 2.0)
    blocked = h.call(exported, {"a": 6, "b": 0})  # the hook sees the tool's own name
    assert blocked.is_error and blocked.blocked_by == "guard", blocked.text
    many = h.call_many([harness.ToolCall(id="1", name="math_div", arguments={"a": 1, "b": 4})])
    assert many[0].value == 0.25 and many[0].name == "math.div"
    assert h.call("nope_x", {}).is_error


def test_pydantic_stays_optional(tmp_path: Path) -> None:
    script = f"""
import sys
from dataclasses import dataclass
sys.modules["pydantic"] = None  # as if it were not installed
import harness
from pathlib import Path
root = Path({str(tmp_path)!r})
(root / "harness.md").write_text("---\\nruntime: {{isolation: inprocess}}\\n---\\n")

@dataclass
class P:
    x: int

with harness.load(root) as h:
    @h.tool
    def f(p: P) -> P:
        return p
    r = h.call("f", {{"p": {{"x": 3}}}})
    assert r.value == {{"x": 3}}, r.text
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
