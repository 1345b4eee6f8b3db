"""The CLI's commands, derived from the operation table (api/app.py `collect_operations`) into api/cli/commands.json.

    python -m api.cli.command_spec            # rewrite api/cli/commands.json after the table changed
    python -m api.cli.command_spec --check    # exit 1 if it is stale (tests/clients/cli/test_cli_table.py)

The table is the source: every operation becomes a command (WebSockets excepted: they need a live two-way
connection), named from its path, its options from its query and body models' JSON Schema, as the OpenAPI
document is (api/http/openapi.py). The CLI reads the JSON rather than the table because the table imports the
whole server (X, WebRTC, ...): `sandbox-desktop --help` and every client command stay a standard-library start.

Naming: the path's words after `/v1/desktop/` (or `/v1/`), parameters left out: `POST /v1/desktop/mouse/click`
is `mouse click`, `POST /v1/desktop/windows/{id}/focus` is `windows focus ID`. A path that names an item (it ends in
a parameter) adds `get` or `delete`; one shared by several methods, or with deeper paths, adds `list`/`create`
(a collection: items live under it) or `get`/`set`/`delete`. NAMES renames the few that read badly that way.

Options: path parameters, then the required scalar fields (at most MAX_POSITIONALS of them), are positional; a
list of strings named `args` takes the rest of the line (`processes run -- ls -la`); every other field is an
option named after its wire name (`clickCount` is `--click-count`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.http.operations import Operation

SPEC_PATH = Path(__file__).with_name("commands.json")

NAMES: dict[str, tuple[str, ...]] = {
    "GET /": ("info",),
    "GET /v1/health": ("health",),
    "GET /v1/health/ready": ("ready",),  # the readiness probe's command (api/cli/probe.py)
    "GET /v1/desktops/{desktop_id}/health/ready": ("desktops", "ready"),
    "POST /v1/desktops/{desktop_id}/tokens": ("desktops", "token"),
    "GET /v1/desktop/screenshot": ("screenshot",),
    "POST /v1/approvals/{approval_id}": ("approvals", "decide"),
    "POST /v1/processes": ("processes", "start"),
    "GET /v1/fs/entries": ("fs", "list"),
    "GET /v1/fs/file": ("fs", "read"),
    "PUT /v1/fs/file": ("fs", "write"),
    "DELETE /v1/fs/entry": ("fs", "delete"),
    "GET /v1/desktop/fs/entries": ("files", "list"),
    "GET /v1/desktop/fs/file": ("files", "read"),
    "PUT /v1/desktop/fs/file": ("files", "write"),
    "DELETE /v1/desktop/fs/entry": ("files", "delete"),
    "POST /v1/desktop/actions": ("actions", "run"),
    "GET /v1/desktop/recordings/{id}/actions.vtt": ("record", "chapters"),
}
"""Commands whose derived name reads badly, by `METHOD path`."""

GROUPS = {"recording": "record", "recordings": "record"}
"""First words renamed: one `record` group for the recording and the recordings paths."""
DESKTOP_GROUPS = {"processes": "exec", "fs": "files"}
"""First words of a desktop's paths renamed where the server has the same words: a desktop's own processes
(`exec run -- ls`, in its sandbox) beside the server's (`processes run -- ls`, on the machine), and its files
(`files read ~/a.txt`, as its user) beside the server's (`fs read /etc/hosts`)."""

KEEP_OPTIONS = frozenset({"POST /v1/desktop/wait"})
"""Operations whose required fields stay options (`wait --timeout-ms 5000 --window ...` reads as it means)."""

MAX_POSITIONALS = 4
"""A model with more required scalar fields than this takes them all as options (`processes config set`)."""

RESERVED = frozenset({"url", "token", "desktop", "output", "timeout", "help"})
"""The CLI's own options (api/cli/operation_args.py), with `--json` for a body, `--input` for an upload and
`--range` for ranges: no field may be named as one of them."""

_SCALARS = ("int", "float", "str", "enum", "value")
_WAIT_FIELD = re.compile(r"(^timeoutMs|TimeoutMs|^waitMs)$")


def kebab(name: str) -> str:
    """`clickCount` → `click-count`, `display_width` → `display-width`."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).replace("_", "-").lower()


def op_key(op: Operation) -> str:
    return f"{op.method} {op.path}"


def static_words(path: str) -> tuple[str, ...]:
    desktop = path.startswith("/v1/desktop/")
    rest = path.removeprefix("/v1/desktop/") if desktop else path.removeprefix("/v1/")
    words = [w for w in rest.strip("/").split("/") if w and not w.startswith("{")]
    if words:
        words[0] = GROUPS.get(words[0], words[0])
        if desktop:
            words[0] = DESKTOP_GROUPS.get(words[0], words[0])
    return tuple(words)


def command_words(op: Operation, operations: Sequence[Operation]) -> tuple[str, ...]:
    """The words that name `op` on the command line (the module docstring's rule)."""
    if op_key(op) in NAMES:
        return NAMES[op_key(op)]
    words = static_words(op.path)
    if op.path.endswith("}"):
        return (*words, {"GET": "get", "DELETE": "delete"}.get(op.method, "set"))
    others = [o for o in operations if o is not op]
    shared = any(static_words(o.path) == words for o in others)
    deeper = any(static_words(o.path)[:len(words)] == words and len(static_words(o.path)) > len(words)
                 for o in others)
    if not shared and not deeper:
        return words
    collection = any(o.path.startswith(op.path + "/{") for o in others)
    verbs = {"GET": "list" if collection else "get", "POST": "create" if collection else "set", "PUT": "set",
             "DELETE": "delete"}
    return (*words, verbs[op.method])


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref", "")
    if ref:
        rest = {k: v for k, v in prop.items() if k != "$ref"}
        return {**defs[ref.rsplit("/", 1)[-1]], **rest}
    return prop


def field_type(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The kind of value a field takes on the command line, from its JSON Schema."""
    if "anyOf" in prop:
        options = [o for o in prop["anyOf"] if o.get("type") != "null"]
        if len(options) > 1:
            return {"kind": "value"}  # a union (`int | str | ElementQuery`): JSON when it parses, else the text
        prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **options[0]}
    prop = _resolve(prop, defs)
    if "enum" in prop or "const" in prop:
        return {"kind": "enum", "choices": [str(c) for c in prop.get("enum", [prop.get("const")])]}
    kind = {"integer": "int", "number": "float", "string": "str", "boolean": "bool"}.get(prop.get("type", ""))
    if kind:
        return {"kind": kind}
    if prop.get("type") == "array":
        item = field_type(prop.get("items", {}), defs)
        if item["kind"] in ("int", "float", "str"):
            return {"kind": "list", "item": item["kind"]}
    if prop.get("type") == "object" and _resolve(prop.get("additionalProperties") or {}, defs).get("type") == "string":
        return {"kind": "map"}
    return {"kind": "json"}


def shape(plain: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """What a JSON field holds, in brief: `{x, y}` for an object, `[{type: click|move}]` for a list of kinds."""
    if plain.get("type") == "object" and plain.get("properties"):
        return "{" + ", ".join(plain["properties"]) + "}"
    if plain.get("type") == "array":
        items = _resolve(plain.get("items", {}), defs)
        kinds = items.get("discriminator", {})
        if kinds.get("mapping"):
            return f"[{{{kinds['propertyName']}: {'|'.join(kinds['mapping'])}, ...}}]"
        inner = shape(items, defs)
        return f"[{inner}]" if inner else None
    return None


def field_help(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """The field's description, with its range and default when the description does not give them, and the
    shape of a JSON one."""
    plain = next((o for o in prop.get("anyOf", []) if o.get("type") != "null"), prop)
    plain = _resolve(plain, defs)
    text = (prop.get("description") or plain.get("description") or "").strip()
    low, high = plain.get("minimum"), plain.get("maximum")
    notes = [f"JSON {held}"] if (held := shape(plain, defs)) else []
    if low is not None or high is not None:
        notes.append(f"{low if low is not None else ''}..{high if high is not None else ''}")
    default = prop.get("default")
    if default is not None and default != [] and "default" not in text:
        notes.append(f"default {json.dumps(default)}")
    return f"{text} ({', '.join(notes)})".strip() if notes else text


def model_fields(model: Any, where: str) -> list[dict[str, Any]]:
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    return [{"name": kebab(wire), "wire": wire, "in": where, "required": wire in required,
             "help": field_help(prop, defs), **field_type(prop, defs)}
            for wire, prop in schema.get("properties", {}).items()]


def command_fields(op: Operation) -> list[dict[str, Any]]:
    """Path parameters, then the query's fields and the body's, marked positional where the rule says so."""
    params = [{"name": kebab(name), "wire": name, "in": "path", "required": True, "kind": "str", "help": "",
               "positional": True} for name in re.findall(r"{(\w+)(?::\w+)?}", op.path)]
    fields = [*(model_fields(op.query, "query") if op.query else []),
              *(model_fields(op.body, "body") if op.body else [])]
    scalars = [f for f in fields if f["required"] and f["kind"] in _SCALARS]
    positional = len(scalars) <= MAX_POSITIONALS and op_key(op) not in KEEP_OPTIONS
    for f in fields:
        f["positional"] = (positional and f in scalars) or (f["wire"] == "args" and f["kind"] == "list")
    own = (("json", op.body), ("input", op.upload), ("range", op.ranges))
    reserved = RESERVED | {name for name, used in own if used}
    clash = sorted(f["name"] for f in fields if f["name"] in reserved)
    if clash:  # a field would hide an option of the CLI's: the CLI needs a new rule for it
        raise ValueError(f"{op_key(op)}: fields named as the CLI's own options: {clash}")
    return params + fields


def command(op: Operation, words: tuple[str, ...]) -> dict[str, Any]:
    fields = command_fields(op)
    media = ["application/json"] if op.response is not None else [m.strip() for m in op.media_type.split(",")]
    follows = any(f["wire"] == "follow" for f in fields)
    return {"words": list(words), "op": op_key(op), "summary": op.summary,
            "desktop": op.path.startswith("/v1/desktop/"), "fields": fields, "body": op.body is not None,
            "upload": [m.strip() for m in op.upload.split(",")] if op.upload else None, "media": media,
            "ranges": op.ranges, "stream": follows or "text/event-stream" in media,
            "waits": [f["wire"] for f in fields if _WAIT_FIELD.search(f["wire"])]}


def derive(operations: Sequence[Operation]) -> dict[str, Any]:
    """The spec: one command per operation, WebSockets listed apart; names must be unique."""
    served = [op for op in operations if not op.upgrade]
    commands = [command(op, command_words(op, served)) for op in served]
    seen: dict[tuple[str, ...], str] = {}
    for c in commands:
        words = tuple(c["words"])
        if words in seen:
            raise ValueError(f"{c['op']} and {seen[words]} are both `{' '.join(words)}`: name one in NAMES")
        seen[words] = c["op"]
    return {"about": "Generated by `python -m api.cli.command_spec` from the operation table; do not edit.",
            "commands": commands, "websockets": [op_key(op) for op in operations if op.upgrade]}


def render(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=1, ensure_ascii=False) + "\n"


def current() -> str:
    """What commands.json should hold for the table as it is now."""
    from api.app import collect_operations  # the whole server: only the generator and its test pay for it

    return render(derive(collect_operations()))


def main(argv: Sequence[str] = ()) -> int:
    text = current()
    if "--check" in argv:
        if SPEC_PATH.read_text() != text:
            print(f"{SPEC_PATH} is stale: run `python -m api.cli.command_spec`", file=sys.stderr)
            return 1
        return 0
    SPEC_PATH.write_text(text)
    print(f"wrote {SPEC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
