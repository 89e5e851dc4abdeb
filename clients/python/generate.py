"""Write mnemo_client/_tools.py from Mnemo's OpenAPI schema.

    python manage.py spectacular --format openapi-json | python clients/python/generate.py
    python clients/python/generate.py schema.json --check   # exit 1 when _tools.py is stale

Every `POST /api/v1/tools/<name>` becomes a method named after the tool (required fields
positional, the rest keyword-only), every component a TypedDict or a Literal, and
`POST /api/v1/turns` the method `report_turn`. The GET endpoints are written by hand in
client.py. Standard library only; the output is run through `ruff format` when ruff is
installed, so the committed file is the formatted one.
"""

from __future__ import annotations

import argparse
import json
import keyword
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "src" / "mnemo_client" / "_tools.py"
TOOLS_PATH = "/api/v1/tools/"
# POST endpoints outside /tools/ that take a JSON body the same way: path -> method name.
EXTRA_POSTS = {"/api/v1/turns": "report_turn"}
# GET endpoints whose results client.py types with the generated TypedDicts.
TYPED_GETS = (
    "/api/v1/tools",
    "/api/v1/working-memory",
    "/api/v1/profile",
    "/api/v1/profile-memory",
    "/api/v1/system-prompt",
    "/api/v1/turns/{turn_id}",
)
SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


class Schema:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.paths: dict[str, Any] = schema["paths"]
        self.components: dict[str, Any] = schema.get("components", {}).get("schemas", {})
        self.used: set[str] = set()

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            return self.components[ref_name(node)]
        return node

    def py_type(self, node: dict[str, Any]) -> str:
        """The Python annotation for a schema node; marks the components it names as used."""
        if "$ref" in node:
            name = ref_name(node)
            self._use(name)
            result = name
        elif len(node.get("allOf", ())) == 1:
            result = self.py_type(node["allOf"][0])
        elif "oneOf" in node or "anyOf" in node:
            options = [self.py_type(sub) for sub in node.get("oneOf", node.get("anyOf"))]
            result = " | ".join(dict.fromkeys(options))
        elif "enum" in node:
            result = literal(node["enum"])
        elif node.get("type") in SCALARS:
            result = SCALARS[node["type"]]
        elif node.get("type") == "array":
            result = f"list[{self.py_type(node.get('items', {}))}]"
        elif node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            extra = node["additionalProperties"]
            result = f"dict[str, {self.py_type(extra) if extra else 'Any'}]"
        else:
            result = "dict[str, Any]" if node.get("type") == "object" else "Any"
        if node.get("nullable") and result != "Any":
            result = f"{result} | None"
        return result

    def _use(self, name: str) -> None:
        if name in self.used:
            return
        self.used.add(name)
        for sub in self.components[name].get("properties", {}).values():
            self.py_type(sub)
        for sub in self.components[name].get("allOf", ()):
            self.py_type(sub)

    def result_type(self, operation: dict[str, Any]) -> str:
        types = []
        for status, response in operation["responses"].items():
            content = response.get("content", {}).get("application/json")
            if status.startswith("2") and content:
                types.append(self.py_type(content["schema"]))
        return " | ".join(dict.fromkeys(types)) or "None"


def ref_name(node: dict[str, Any]) -> str:
    return node["$ref"].rsplit("/", 1)[-1]


def literal(values: list[Any]) -> str:
    return f"Literal[{', '.join(repr(value) for value in values)}]"


def docstring(paragraphs: list[str], indent: str) -> str:
    """A triple-quoted docstring, each source line wrapped to fit in 100 columns."""
    width = 92 - len(indent)
    lines: list[str] = []
    for paragraph in paragraphs:
        if lines:
            lines.append("")
        for line in paragraph.strip().splitlines():
            stripped = line.strip()
            hang = "    " if line.startswith(" ") and stripped else ""
            wrapped = textwrap.wrap(stripped, width - len(hang)) or [""]
            lines.extend(hang + part for part in wrapped)
    text = "\n".join(indent + line if line else "" for line in lines)
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'{indent}"""{text.lstrip()}\n{indent}"""\n'


def describe(node: dict[str, Any]) -> str:
    """A node's description without drf-spectacular's list of enum values."""
    text = node.get("description") or ""
    return "" if text.startswith("* `") else text.split("\n\n* `", 1)[0]


def comment(text: str, indent: str) -> str:
    flat = " ".join(text.split())
    return "".join(f"{indent}# {line}\n" for line in textwrap.wrap(flat, 96 - len(indent)))


def render_component(schema: Schema, name: str) -> str:
    node = schema.components[name]
    if "enum" in node:
        return f"{name} = {literal(node['enum'])}\n"
    required = set(node.get("required", ()))
    out = [f"class {name}(TypedDict):\n"]
    if node.get("description"):
        out.append(docstring([node["description"]], "    "))
    for field, sub in node.get("properties", {}).items():
        if keyword.iskeyword(field) or not field.isidentifier():
            raise SystemExit(f"{name}.{field} is not a Python identifier; extend generate.py")
        annotation = schema.py_type(sub)
        if field not in required:
            annotation = f"NotRequired[{annotation}]"
        description = describe(sub) or describe(schema.resolve(sub))
        out.append(comment(description, "    ") if description else "")
        out.append(f"    {field}: {annotation}\n")
    if len(out) == 1:
        out.append("    pass\n")
    return "".join(out)


def render_method(schema: Schema, method: str, path: str, operation: dict[str, Any]) -> str:
    body = schema.resolve(operation["requestBody"]["content"]["application/json"]["schema"])
    properties: dict[str, Any] = body.get("properties", {})
    required = [name for name in properties if name in body.get("required", ())]
    optional = [name for name in properties if name not in required]
    params = ["self"]
    params += [f"{name}: {schema.py_type(properties[name])}" for name in required]
    if optional:
        params.append("*")
        params += [f"{name}: {schema.py_type(properties[name])} | None = None" for name in optional]
    for name in properties:
        if keyword.iskeyword(name) or not name.isidentifier():
            raise SystemExit(f"{method}: '{name}' is not a Python identifier; extend generate.py")
    summary = operation.get("summary", "").rstrip(".") + "."
    paragraphs = [summary, operation.get("description", "")]
    args = [f"{name}: {' '.join(describe(properties[name]).split())}" for name in properties]
    args = [arg.rstrip(": ") for arg in args]
    if args:
        paragraphs.append("Args:\n" + "\n".join(f"    {arg}" for arg in args))
    paragraphs.append(f"POST {path}")
    arguments = ", ".join(f'"{name}": {name}' for name in properties)
    return (
        f"    def {method}({', '.join(params)}) -> {schema.result_type(operation)}:\n"
        + docstring([p for p in paragraphs if p.strip()], "        ")
        + f'        return self._post("{path}", {{{arguments}}})\n'
    )


def render(openapi: dict[str, Any]) -> str:
    """The source of _tools.py for this OpenAPI schema (before formatting)."""
    schema = Schema(openapi)
    methods: list[str] = []
    tool_names: list[str] = []
    for path, item in openapi["paths"].items():
        operation = item.get("post")
        if operation is None:
            continue
        if path.startswith(TOOLS_PATH):
            name = operation["operationId"]
            tool_names.append(name)
        elif path in EXTRA_POSTS:
            name = EXTRA_POSTS[path]
        else:
            continue
        methods.append(render_method(schema, name, path, operation))
    gets = {path: schema.result_type(openapi["paths"][path]["get"]) for path in TYPED_GETS}
    enums = sorted(n for n in schema.used if "enum" in schema.components[n])
    classes = sorted(n for n in schema.used if "enum" not in schema.components[n])
    header = [
        '"""Mnemo\'s agent tools: generated by clients/python/generate.py from the OpenAPI',
        'schema (GET /api/schema/, or manage.py spectacular). Do not edit by hand."""',
        "",
        "# The descriptions are the API's own text, en dashes included.",
        "# ruff: noqa: RUF002",
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal, NotRequired, TypedDict",
        "",
        f"TOOL_NAMES = ({''.join(f'{name!r}, ' for name in tool_names)})",
        "# The result types of the GET endpoints, for client.py's annotations.",
        f"GET_RESULTS = {gets!r}",
        "",
    ]
    parts = ["\n".join(header)]
    parts += [render_component(schema, name) for name in enums]
    parts += [render_component(schema, name) for name in classes]
    parts.append(
        "class Tools:\n"
        '    """One method per agent tool; MnemoClient supplies `_post`."""\n\n'
        "    def _post(self, path: str, body: dict[str, Any]) -> Any:\n"
        "        raise NotImplementedError\n\n" + "\n".join(methods)
    )
    return "\n\n".join(parts)


def ruff_format(source: str, filename: Path = OUT) -> str:
    """`source` as `ruff format` writes it (unchanged when ruff is not installed)."""
    ruff = Path(sys.executable).with_name("ruff")
    command = str(ruff) if ruff.exists() else shutil.which("ruff")
    if command is None:
        return source
    result = subprocess.run(  # noqa: S603 - ruff, with fixed arguments
        [command, "format", "--stdin-filename", str(filename), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=filename.parent,
    )
    return result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("schema", nargs="?", default="-", help="OpenAPI JSON file, - for stdin")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="fail if --out is not current")
    options = parser.parse_args()
    text = sys.stdin.read() if options.schema == "-" else Path(options.schema).read_text()
    source = ruff_format(render(json.loads(text)), options.out)
    if options.check:
        current = options.out.read_text() if options.out.exists() else ""
        if current != source:
            print(f"{options.out} is out of date; run generate.py", file=sys.stderr)
            return 1
        return 0
    options.out.write_text(source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
