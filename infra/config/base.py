"""The base of every config section: camelCase keys, unknown keys refused, frozen, input read strictly. Its rules
are plain functions, `Annotated[..., AfterValidator(rule)]` on a field or in `checks` for the whole section: mutmut 3
does not mutate decorated methods (docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import typing
from typing import Any, Callable, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from infra.config.errors import shown


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        # A field's description is the docstring under it (one line wherever shown: `__pydantic_init_subclass__`).
        use_attribute_docstrings=True,
        # inf/nan would pass `ge=0` and reach the plan as `$inf/h` and as `Infinity`, which is not JSON.
        allow_inf_nan=False,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        for field in cls.model_fields.values():
            field.description = field.description and field.description.replace("\n", " ")

    checks: ClassVar[tuple[Callable[[Any], None], ...]] = ()
    """The section's rules across its fields, run in this order once every field is valid."""

    @model_validator(mode="after")
    def _run_checks(self) -> Any:
        for check in self.checks:
            check(self)
        return self

    @field_validator("*", mode="before")
    @classmethod
    def _plain_input(cls, value: Any, info: ValidationInfo) -> Any:
        """What pydantic's lax mode gets wrong for a stack file: an empty section means its defaults; `true` is not
        1, and neither `1` nor `yes` a boolean (`pulumi config set --path` writes "true"/"false", which are)."""
        field = cls.model_fields[info.field_name]
        annotation = field.annotation
        if value is None or value == "":
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                return field.get_default(call_default_factory=True)
            return value
        if annotation is bool:
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if not isinstance(value, bool):
                raise ValueError(f"{shown(value)} is not allowed; allowed: true or false")
            return value
        kind = _number_kind(annotation)
        if kind and isinstance(value, bool):
            raise ValueError(f"{str(value).lower()} is not allowed; allowed: {kind}")
        if kind and typing.get_origin(annotation) is dict and isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, bool):
                    raise ValueError(f"{k!r}: {str(v).lower()} is not allowed; allowed: {kind}")
        return value


def _number_kind(annotation: Any) -> Optional[str]:
    """'a whole number' / 'a number' when the field (or its map's values) holds numbers."""
    args = typing.get_args(annotation)[1 if typing.get_origin(annotation) is dict else 0 :]
    types = {annotation, *args}
    if bool in types:
        return None
    return "a whole number" if int in types else "a number" if float in types else None
