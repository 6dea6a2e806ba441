"""Properties read against a loaded model: parse and check property text
(`parse_properties`), and turn what a user passes as `prop` into one checked
property and the collection it belongs to (`resolve_property`).

The model is a [`jaxmc.Model`][] (duck-typed: its `checked` program and the
constants its earlier properties declared). This sits below the API so that
both `jaxmc.api` and the differentiable path (`jaxmc.diff`) read properties
the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from .. import lang, semantics
from ..errors import JaxmcError, ModelCheckingError
from ..semantics.constants import MissingConstantsError
from ..semantics.properties import CheckedProperty


ConstantsArg = str | Mapping[str, Any] | None


def python_hint(err: MissingConstantsError) -> str:
    """How to give the constants of `err` values from Python."""
    values = ", ".join(f'"{n}": ...' for n in err.names)
    if err.in_properties:
        return (
            f"pass constants={{{values}}} to jaxmc.load_properties "
            "(or to jaxmc.load_model)"
        )
    hint = f"pass constants={{{values}}} to jaxmc.load_model"
    doubles = [
        n for n in err.names if str(getattr(err.types.get(n), "value", "")) == "double"
    ]
    if doubles:
        names = ", ".join(f'"{n}"' for n in doubles)
        them = "them" if len(doubles) > 1 else "it"
        hint += f" (or parameters=({names},) to keep {them} symbolic, for gradients)"
    return hint


@contextlib.contextmanager
def api_hints() -> Iterator[None]:
    """Errors about undefined constants say how to give them values in Python."""
    try:
        yield
    except MissingConstantsError as err:
        raise err.rehint(python_hint(err)) from None


def parse_properties(
    text: str,
    model: Any,
    constants: ConstantsArg = None,
    *,
    file: str | None = None,
    errors: str = "raise",
) -> semantics.CheckedProperties:
    """Parse and check properties given as text (one or more, `;`-separated).

    With `errors="keep"`, a property that fails its checks is kept with its
    error, which is raised when that property is checked (so one bad property
    does not hide the others of a file)."""
    if not hasattr(model, "checked"):
        raise TypeError(
            f"a property given as text needs the model it refers to (its constants,"
            f" formulas and labels), the `jaxmc.Model` of `jaxmc.load_model`, not"
            f" {type(model).__name__}: pass that Model (it builds once and keeps"
            f" the explicit model), or properties checked against it"
            f" (`jaxmc.load_properties(path, model)`)"
        )
    with api_hints():
        pf = lang.parse_properties(text, file=file)
        props = semantics.check_properties(
            pf, model.checked, constants, source=text, file=file, errors=errors,
            known=sorted(model._declared_by_properties),
        )  # fmt: skip
    for p in props:
        if isinstance(p.error, MissingConstantsError):
            p.error.rehint(python_hint(p.error))
    model._declared_by_properties.update(c.name for c in pf.constants)
    return props


def resolve_property(model: Any, prop: Any) -> tuple[Any, semantics.CheckedProperties]:
    """`prop` as (one checked property, the collection it belongs to)."""
    if isinstance(prop, str):
        props = parse_properties(prop, model)
        if len(props) != 1:
            raise ModelCheckingError(
                f"expected exactly one property, got {len(props)}",
                hint="pass one property at a time, or use load_properties",
            )
        return props[0], props
    if isinstance(prop, CheckedProperty):
        return prop, prop.properties
    if isinstance(prop, tuple) and len(prop) == 2:
        props, key = prop
        return props.get(key), props
    raise TypeError(
        "`prop` should be a property string like 'P=? [ F \"goal\" ]', a property "
        "from `jaxmc.load_properties`, or a (properties, name_or_index) pair."
    )


def property_to_check(
    model: Any, prop: Any, properties: semantics.CheckedProperties | None = None
) -> tuple[Any, semantics.CheckedProperties]:
    """The property that [`jaxmc.check`][] checks: `prop` looked up in
    `properties` by name or index if given (else resolved as
    `resolve_property` does), with the collection it refers to. Raises the
    error a property was kept with (`errors="keep"`)."""
    if properties is not None and isinstance(prop, (str, int)):
        try:
            checked_prop = properties.get(prop)
        except (KeyError, IndexError, JaxmcError):
            if isinstance(prop, int):
                raise
            checked_prop, properties = resolve_property(model, prop)
    else:
        checked_prop, properties = resolve_property(model, prop)
    if checked_prop.properties is not None:
        properties = checked_prop.properties
    if checked_prop.error is not None:
        raise checked_prop.error
    return checked_prop, properties
