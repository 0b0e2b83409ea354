"""`GET /openapi.json`: the REST API as OpenAPI 3.1, assembled by apispec from the `@endpoint` declarations
and the pydantic models the handlers validate and answer with, so it describes what the code does."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from apispec import APISpec
from flask import Blueprint, Flask, Response, current_app, jsonify
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, JsonSchemaValue, models_json_schema

from server.api.endpoint import Operation

bp = Blueprint("openapi", __name__)

_ARGUMENT = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
REF_TEMPLATE = "#/components/schemas/{model}"
DESCRIPTION = (
    "Errors are `{success: false, error, code}` with a 4xx/5xx status. With AUTH_TOKENS set every call "
    "needs `Authorization: Bearer <token>` (401 `unauthorized` without); without them a request whose Host "
    "header is not one of the server's names answers 403 `forbidden_host`. While the database does not answer, "
    "every call answers 503 `database_unavailable` at once. Socket.IO and the task event "
    "types are described in docs/API.md."
)


@bp.get("/openapi.json")
def openapi_json() -> Response:
    if "openapi_document" not in current_app.extensions:
        current_app.extensions["openapi_document"] = build_document(current_app)
    return jsonify(current_app.extensions["openapi_document"])


def _operations(app: Flask) -> list[tuple[str, str, list[str], Operation]]:
    """(OpenAPI path, method, path argument names, operation) of every rule whose view is an `@endpoint`."""
    found = []
    for rule in app.url_map.iter_rules():
        operation = getattr(app.view_functions[rule.endpoint], "api_operation", None)
        if operation is None:
            continue
        path = _ARGUMENT.sub(r"{\1}", rule.rule)
        arguments = _ARGUMENT.findall(rule.rule)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((path, method.lower(), arguments, operation))
    return sorted(found, key=lambda item: (item[0], item[1]))


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(by_alias=True, ref_template=REF_TEMPLATE)
    required = set(schema.get("required", ()))
    return [{"name": name, "in": "query", "required": name in required, "schema": prop,
             **({"description": prop["description"]} if "description" in prop else {})}
            for name, prop in schema.get("properties", {}).items()]


# A model's schema reference by (model, mode); pydantic types the model as a model or a pydantic dataclass.
Refs = dict[tuple[Any, JsonSchemaMode], JsonSchemaValue]


def _operation_dict(arguments: list[str], op: Operation, refs: Refs) -> dict[str, Any]:
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
                  for name in arguments]
    if op.query is not None:
        parameters += _query_parameters(op.query)
    result: dict[str, Any] = {
        "summary": op.summary, "parameters": parameters,
        "responses": {str(status): {"description": HTTPStatus(status).phrase,
                                    "content": {"application/json": {"schema": refs[(model, "serialization")]}}}
                      for status, model in sorted(op.responses.items())},
    }
    for status, media in op.files.items():  # a file answer, or (no media type) an empty one
        result["responses"][str(status)] = {"description": HTTPStatus(status).phrase, **(
            {"content": {media: {"schema": {"type": "string", "format": "binary"}}}} if media else {})}
    if op.upload is not None:
        result["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": [op.upload],
            "properties": {op.upload: {"type": "string", "format": "binary"}}}}}}
    if op.description:
        result["description"] = op.description
    if op.body is not None:
        result["requestBody"] = {"required": op.body_required,
                                 "content": {"application/json": {"schema": refs[(op.body, "validation")]}}}
    return result


def build_document(app: Flask) -> dict[str, Any]:
    operations = _operations(app)
    spec = APISpec(title="Agent team chat", version="1", openapi_version="3.1.0",
                   info={"description": DESCRIPTION}, security=[{}, {"bearer": []}])
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    models: set[tuple[type[BaseModel], JsonSchemaMode]] = {
        (op.body, "validation") for *_, op in operations if op.body is not None}
    models |= {(model, "serialization") for *_, op in operations for model in op.responses.values()}
    refs, definitions = models_json_schema(sorted(models, key=lambda m: (m[0].__name__, m[1])),
                                           ref_template=REF_TEMPLATE)
    for name, schema in sorted(definitions.get("$defs", {}).items()):
        spec.components.schema(name, schema)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, arguments, op in operations:
        paths.setdefault(path, {})[method] = _operation_dict(arguments, op, refs)
    for path, methods in paths.items():
        spec.path(path=path, operations=methods)
    return spec.to_dict()
