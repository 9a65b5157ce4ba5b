"""What every command shares: the group that maps bad input to exit code 2, the --json option, output, memory."""

from __future__ import annotations

import importlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import click

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.api import Memory, connect
from memory_assets.errors import ScopeError, ValidationError

EXIT_BAD_INPUT = 2

# The shared `--json` flag: machine-readable output instead of the human summary.
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


class BadInput(click.ClickException):
    """Bad input or a missing scope, so click prints the message on stderr and the command exits 2."""

    exit_code = EXIT_BAD_INPUT


class MemoryGroup(click.Group):
    """A click group whose commands raise ValidationError/ScopeError freely: the one place they become exit 2.

    Commands named in `lazy_commands` ("module.attribute") load when invoked, so `remember` never pays for
    importing Dagster or the MCP SDK that other commands need.
    """

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, loaded or not, for --help."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command, importing its module the first time it is asked for."""
        if name in self.lazy_commands and name not in self.commands:
            module, attribute = self.lazy_commands[name].rsplit(".", 1)
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, turning the errors callers act on into click's own usage-style failure."""
        try:
            return super().invoke(ctx)
        except (ValidationError, ScopeError) as error:
            raise BadInput(gates.redacted(str(error))) from error
        except click.ClickException as error:  # click's own usage errors quote the value they refused
            vars(error)["message"] = gates.redacted(error.message)  # click types the attribute Final
            raise


def emit(data: Any, as_json: bool, text: str | None = None) -> None:
    """Print a result as sorted JSON (--json) or as its human text, so every command reads the same way."""
    if as_json:
        click.echo(json.dumps(data, default=str, indent=2, sort_keys=True))
    else:
        click.echo(text if text is not None else json.dumps(data, default=str, indent=2))


def memory() -> Memory:
    """Open memory on DATABASE_URL or the embedded server, as the Python API does."""
    return connect()


def field_label(key: object) -> str:
    """A field name as an error may show it: the name itself when it is a plain identifier, else "fields"."""
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", key) and not gates.has_secret(key):
        return key
    return "fields"


def remember_fields(fields: dict[str, Any], default_project: str | None = None) -> dict[str, Any]:
    """The keyword arguments of one remember from a dict of candidate fields, so unknown fields are bad input."""
    unknown = sorted(set(fields) - set(V.CANDIDATE_FIELDS))
    if unknown:
        raise ValidationError(field_label(unknown[0]), f"unknown field (known: {', '.join(V.CANDIDATE_FIELDS)})")
    fields = dict(fields)
    fields.setdefault("project", default_project)
    if isinstance(fields.get("valid_from"), str):
        fields["valid_from"] = gates.iso_time("valid_from", fields["valid_from"])
    for name in ("project", "kind", "type", "title", "body"):
        fields.setdefault(name, None)
    return fields


# a JSON string, or an unterminated one up to the end (possessive: matched in one pass, never backtracking)
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deeply a JSON text nests (strings skipped), in linear passes that run in C: checked before json.loads,
    whose recursion a deeply nested line would exhaust."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValidationError(field_label(key), "duplicate key")
        seen[key] = value
    return seen


def _number(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > V.IMPORT_MAX_NUMBER_CHARS:
            raise ValidationError("number", f"at most {V.IMPORT_MAX_NUMBER_CHARS} characters")
        return kind(text)
    return parse


def _no_constant(name: str) -> Any:
    raise ValidationError("number", f"{name} is not a JSON number")


# one decoder for every text (json.loads with hooks builds a decoder per call: a quarter of a line's parse)
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_int=_number(int), parse_float=_number(float),
                            parse_constant=_no_constant)


def parse_json(text: str, field_name: str) -> Any:
    """A JSON text with its nesting, numbers and keys bounded: ValidationError for a duplicate key, NaN, a number
    too long or nesting too deep (never RecursionError), JSONDecodeError for anything that is not JSON."""
    # a text with no more opening brackets than the limit (strings' own counted too) cannot nest deeper
    if text.count("[") + text.count("{") > V.IMPORT_MAX_DEPTH and json_depth(text) > V.IMPORT_MAX_DEPTH:
        raise ValidationError(field_name, f"nested deeper than {V.IMPORT_MAX_DEPTH} levels")
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def read_text(path: str, field_name: str, max_bytes: int) -> str:
    """A file's text as UTF-8, at most `max_bytes` of it read (a pipe or /dev/zero has no size to check first), so an
    unreadable, mis-encoded or too large file is bad input naming the option."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValidationError(field_name, f"at most {max_bytes} bytes")
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValidationError(field_name, f"must be valid UTF-8 (byte {error.start})") from error
    except OSError as error:
        raise ValidationError(field_name, f"cannot read {path}: {error.strerror}") from error


def read_json_object(path: str) -> dict[str, Any]:
    """One JSON object from a file, so remember can take its fields from --json-file."""
    try:
        data = parse_json(read_text(path, "json_file", V.IMPORT_MAX_LINE_BYTES), "json_file")
    except json.JSONDecodeError as error:
        raise ValidationError("json_file", f"not valid JSON ({error.msg} at line {error.lineno})") from error
    if not isinstance(data, dict):
        raise ValidationError("json_file", "must hold one JSON object")
    return data


def summary_text(data: dict[str, Any]) -> str:
    """Units by status and rejections by reason as aligned text, shared by stats and materialize."""
    lines = ["units by status:"]
    lines += [f"  {status:<12} {count}" for status, count in data["units_by_status"].items()] or ["  (none)"]
    lines.append("rejections by reason:")
    lines += [f"  {reason:<22} {count}" for reason, count in data["rejections_by_reason"].items()] or ["  (none)"]
    return "\n".join(lines)
