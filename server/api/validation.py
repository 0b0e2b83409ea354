"""Input validation with pydantic models that answers in the API's own error shape and codes (API.md).

The models are the code's definition of each request: handlers validate with them and `/openapi.json`
describes them, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from server.errors import ApiError

# Error types raised by validators that are API codes in their own right, with their status.
CODE_STATUS = {"message_too_large": 413}


class RequestModel(BaseModel):
    """A request body or query; unknown keys are ignored, as they always were.

    A failing field answers 400 `invalid_<field>` unless `error_codes` names its code."""

    model_config = ConfigDict(extra="ignore")
    error_codes: ClassVar[dict[str, str]] = {}


class ResponseModel(BaseModel):
    """A JSON answer; building one with a key the model does not know is a bug, so it fails loudly."""

    model_config = ConfigDict(extra="forbid")
    # Handlers send the model dumped whole: every field, null when it has no value (tools/gen_api_types.py).
    sends_defaults: ClassVar[bool] = True


def wire(model: BaseModel) -> dict[str, Any]:
    """A model as JSON goes out, on every edge (a REST body, a socket acknowledgement, a stored answer)."""
    return model.model_dump(mode="json", by_alias=True)


M = TypeVar("M", bound=BaseModel)


def storable(text: str) -> bool:
    """Whether the text can be stored: valid Unicode (JSON lets a client send a lone surrogate) and no NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def check_storable(value: str) -> str:
    if not storable(value):
        raise PydanticCustomError("unstorable_text", "must be valid Unicode without NUL characters")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank_text", "must not be blank")
    return value




NonBlankText = Annotated[str, StringConstraints(min_length=1), AfterValidator(_not_blank),
                         AfterValidator(check_storable)]


def validated(model: type[M], payload: Any, *, context: dict[str, Any] | None = None) -> M:
    """`payload` as a `model`, or the ApiError its first problem answers."""
    try:
        return model.model_validate(payload, context=context)
    except ValidationError as exc:
        raise _api_error(model, exc.errors(include_url=False)[0]) from None


def _api_error(model: type[BaseModel], error: ErrorDetails) -> ApiError:
    if not error["loc"]:
        return ApiError(400, "invalid_json", "the body must be a JSON object")
    field = str(error["loc"][0])
    codes = getattr(model, "error_codes", {})
    code = error["type"] if error["type"] in CODE_STATUS else codes.get(field, f"invalid_{field}")
    return ApiError(CODE_STATUS.get(code, 400), code, f"`{field}`: {error['msg']}")
