"""Our descriptors against Kafka's own JSON message schemas.

The codec reads its schemas from kio's generated classes, which rename some fields; this
test holds every message and version we expose against the JSON files Kafka generates its
Java classes from (kafka-python ships a copy of Kafka 4.x's, a test-only dependency): the
same fields in the same order, each named the snake_case of Kafka's name, with Kafka's
type, nullability, tag and default."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import uuid

import pytest

from kcore.protocol.kafka import (
    ArraySchema,
    FieldSchema,
    StructSchema,
    known_versions,
    message_schema,
)

from ._kafka_values import frozen_to_plain

# The messages every Kafka client speaks: they must be covered, whatever else is.
REQUIRED_API_KEYS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 36}


def schema_directory() -> pathlib.Path | None:
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.origin is None:
        return None
    path = pathlib.Path(spec.origin).parent / "protocol" / "schemas" / "resources"
    return path if path.is_dir() else None


@pytest.fixture(scope="module")
def kafka_json(require_external) -> dict[tuple[int, str], dict]:
    """(api key, "request" | "response") -> Kafka's JSON schema of that message."""
    directory = schema_directory()
    require_external(
        "Kafka's JSON message schemas (from kafka-python)",
        directory is not None,
        "pip install -e '.[kafka-clients]'",
    )
    messages = {}
    for path in sorted(directory.glob("*.json")):
        message = json.loads(re.sub(r"(?m)^\s*//.*$", "", path.read_text()))
        if "apiKey" in message and message.get("type") in ("request", "response"):
            messages[(message["apiKey"], message["type"])] = message
    return messages


def snake_case(name: str) -> str:
    """Kafka's field names are CamelCase (`ThrottleTimeMs`, `KRaftVersion`)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def in_versions(spec: str | None, version: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def json_default(field: dict, version: int, common: dict):
    """The default Kafka's generated Java code gives a field of this version."""
    kafka_type = field["type"]
    default = field.get("default")
    if default == "null":
        return None
    if kafka_type.startswith("[]"):
        return []
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16"):
        if isinstance(default, str) and default:
            return int(default, 0)  # "-1", "0x7fffffff"
        return int(default or 0)  # some files write a JSON number
    if kafka_type == "bool":
        return default in ("true", True)
    if kafka_type == "float64":
        return float(default) if default else 0.0
    if kafka_type == "string":
        return default or ""
    if kafka_type == "bytes":
        return b""
    if kafka_type == "records":
        return None if in_versions(field.get("nullableVersions"), version) else b""
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    return {  # a struct: its fields' defaults
        snake_case(inner["name"]): json_default(inner, version, common)
        for inner in struct_fields(field, common)
        if in_versions(inner["versions"], version)
    }


def struct_fields(field: dict, common: dict) -> list[dict]:
    if "fields" in field:
        return field["fields"]
    return common[field["type"].removeprefix("[]")]


def compare_struct(
    json_fields: list[dict], ours: StructSchema, version: int, common: dict, path: str
) -> list[str]:
    """The differences, as readable lines."""
    present = [field for field in json_fields if in_versions(field["versions"], version)]
    expected_names = [snake_case(field["name"]) for field in present]
    names = [field.name for field in ours.fields]
    if names != expected_names:
        return [f"{path}: fields {names}, Kafka's JSON has {expected_names}"]
    problems = []
    for theirs, field in zip(present, ours.fields, strict=True):
        problems += compare_field(theirs, field, version, common, f"{path}.{field.name}")
    return problems


def compare_field(
    theirs: dict, field: FieldSchema, version: int, common: dict, path: str
) -> list[str]:
    problems = []
    kafka_type = theirs["type"]
    tagged = in_versions(theirs.get("taggedVersions"), version)
    tag = int(theirs["tag"]) if tagged else None  # some files write the tag as a string
    nullable = in_versions(theirs.get("nullableVersions"), version)
    if field.tag != tag:
        problems.append(f"{path}: tag {field.tag}, Kafka's is {tag}")
    if field.nullable != nullable:
        problems.append(f"{path}: nullable {field.nullable}, Kafka's {nullable}")
    default = frozen_to_plain(field.default)
    if default != json_default(theirs, version, common):
        problems.append(f"{path}: default {default!r}, Kafka's {theirs.get('default')!r}")

    element_type = kafka_type.removeprefix("[]")
    is_array = kafka_type.startswith("[]")
    ours = field.type
    if is_array != isinstance(ours, ArraySchema):
        return [*problems, f"{path}: type {ours}, Kafka's {kafka_type}"]
    if is_array:
        ours = ours.element
    if element_type[0].isupper():  # a struct
        if not isinstance(ours, StructSchema) or ours.name != element_type:
            return [*problems, f"{path}: type {ours}, Kafka's {kafka_type}"]
        fields = struct_fields(theirs, common)
        problems += compare_struct(fields, ours, version, common, path)
    elif ours != element_type:
        problems.append(f"{path}: type {ours}, Kafka's {kafka_type}")
    return problems


def test_every_field_is_named_and_typed_as_in_kafkas_json(kafka_json):
    problems = []
    compared = set()
    for (api_key, kind), message in sorted(kafka_json.items()):
        versions = known_versions(api_key)
        if versions is None:
            continue
        common = {struct["name"]: struct["fields"] for struct in message.get("commonStructs", [])}
        valid = [v for v in versions if in_versions(message["validVersions"], v)]
        if api_key in REQUIRED_API_KEYS and valid != list(versions):
            # kio is newer than kafka-python's copy: the versions a client uses go unchecked.
            problems.append(f"{message['name']}: kio has {versions}, Kafka's JSON {valid}")
        for version in valid:
            schema = message_schema(api_key, version, kind)
            if schema.body.name != message["name"]:
                problems.append(f"{schema.label}: Kafka calls it {message['name']}")
            if schema.flexible != in_versions(message["flexibleVersions"], version):
                problems.append(f"{schema.label}: flexible is {schema.flexible}")
            problems += compare_struct(
                message["fields"], schema.body, version, common, schema.label
            )
            compared.add(api_key)
    assert not problems, "\n".join(problems)
    assert compared >= REQUIRED_API_KEYS
