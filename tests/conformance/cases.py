"""Turn the suite's files into cases, and run one case through jaxmc."""

from __future__ import annotations

import functools
import math
import traceback
from pathlib import Path

from . import exports, suite


def _expand(consts: str) -> list[str]:
    """Concrete constant settings of a `-const` string with ranges."""
    import jaxmc.semantics as sem

    if not consts:
        return [""]
    settings = sem.expand_constants(consts)
    return [",".join(f"{k}={_fmt(v)}" for k, v in s.items()) for s in settings]


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def property_lines(props: Path) -> list[tuple[int, str | None]] | str:
    """(start line, name) of each property in the file, or an error
    message."""
    import jaxmc.lang as lang
    from jaxmc.errors import JaxmcError

    try:
        pf = lang.parse_properties(props.read_text(), file=str(props))
    except JaxmcError as e:
        return str(e)
    return [(p.span.line, p.name) for p in pf.properties]


def all_cases() -> list[suite.Case]:
    """Every case: the RESULTs of the in-scope models' property files (with
    one "export" case per configuration that asks for an exported file),
    then the cases of the `.auto` files (`auto.py`)."""
    from . import auto

    cases: list[suite.Case] = []
    for model in suite.in_scope_models():
        for props in suite.props_files(model):
            cases.extend(_cases_for(model, props))
    return cases + auto.cases()


def _cases_for(model: Path, props: Path) -> list[suite.Case]:
    text = props.read_text(errors="replace")
    annotations = suite.result_annotations(text)
    if not annotations:
        return []
    lines = property_lines(props)
    out: list[suite.Case] = []
    for config in suite.configs(model, props):
        if config.exports:
            why = config.skip or exports.why_not(config)
            out.append(
                suite.Case(
                    model,
                    props,
                    config,
                    -1,
                    0,
                    "",
                    config.consts,
                    skip=why,
                    tag="export",
                )
            )
            if exports.imports_results(config):
                continue  # PRISM checks no property then
        if isinstance(lines, str):
            out.append(
                suite.Case(model, props, config, -1, 1, lines, "", skip=config.skip)
            )
            continue
        try:
            settings = _expand(config.consts)
        except Exception as e:  # noqa: BLE001 - reported as the case's failure
            out.append(
                suite.Case(model, props, config, -1, 1, f"consts: {e}", config.consts,
                           skip=config.skip)
            )  # fmt: skip
            continue
        prev = 0
        for index, (line, name) in enumerate(lines):
            mine = [a for a in annotations if prev < a[0] < line]
            prev = line
            if not mine or not suite.selects(config.only_property, index, name):
                continue
            for setting in settings:
                specific = [
                    a for a in mine if a[1] and suite.matches_setting(a[1], setting)
                ]
                generic = [a for a in mine if not a[1]]
                chosen = specific or generic
                if not chosen:
                    continue
                out.append(
                    suite.Case(
                        model,
                        props,
                        config,
                        index,
                        line,
                        chosen[0][2],
                        setting,
                        skip=config.skip,
                    )
                )
    return out


@functools.lru_cache(maxsize=8)
def _load(
    model: str, consts: str, prob_checks: bool = True, model_type: str | None = None
):
    import jaxmc

    m = jaxmc.load_model(
        model, consts or None, prob_checks=prob_checks, model_type=model_type
    )
    m.build()
    return m


def run_case(case: suite.Case) -> tuple[str, str]:
    """("pass" | "fail" | "skip", detail)."""
    import jaxmc
    from jaxmc.errors import JaxmcError

    from . import auto

    if case.tag == "export":
        if case.props != case.model:  # a `.props.args` line, not an `.auto` one
            return exports.run_case(case)
        return auto.run_export_case(case)
    if case.index < 0:
        return "fail", f"could not read the properties file: {case.expected}"
    expected = suite.parse_expected(case.expected)
    if isinstance(expected, tuple) and expected[0] == "skip":
        return "skip", expected[1]
    want_error = isinstance(expected, tuple) and expected[0] == "error"
    if case.config.import_model is not None:
        kind, message, got = auto.run_import_case(case)
        if kind == "error":
            return ("pass", "") if want_error else ("fail", message)
        if want_error:
            return "fail", f"expected an error, got {got!r}"
        return compare(got, expected)
    try:
        c = case.config
        model = _load(str(case.model), case.consts, c.prob_checks, c.import_type)
        props = jaxmc.load_properties(
            case.props, model, case.consts or None, errors="keep"
        )
        kwargs = {"relative": c.relative, "criterion": suite.criterion()}
        if c.method:
            kwargs["method"] = c.method
        if c.epsilon is not None:
            kwargs["epsilon"] = c.epsilon
        if c.max_iters is not None:
            kwargs["max_iters"] = c.max_iters
        result = jaxmc.check(model, case.index, properties=props, **kwargs)
        got = result.value
    except JaxmcError as e:
        if want_error:
            return "pass", ""
        reason = out_of_scope_reason(e)
        if reason:
            return "skip", reason
        return "fail", f"{type(e).__name__}: {e}"
    except Exception:  # noqa: BLE001 - any other exception is a jaxmc bug
        return "fail", "internal error:\n" + traceback.format_exc(limit=-6)
    if want_error:
        return "fail", f"expected an error, got {got!r}"
    return compare(got, expected)


#: UnsupportedError messages for features the suite's scope excludes
#: (../shared/README.md: LTL, multi-objective; co-safe LTL rewards), with
#: their skip category.
_OUT_OF_SCOPE_FEATURES = {
    "LTL": "LTL",
    "co-safe": "LTL",
    "multi-objective": "multi-objective",
    "multi(": "multi-objective",
}


def out_of_scope_reason(e: Exception) -> str | None:
    from jaxmc.errors import UnsupportedError

    if isinstance(e, UnsupportedError):
        for feature, cat in _OUT_OF_SCOPE_FEATURES.items():
            if feature in e.message:
                return f"{cat}: {e.message}"
    return None


#: PRISM's test mode compares at 1e-5 relative (`ResultTesting.
#: DEFAULT_TESTING_ACCURACY`); we report passes at 1e-6 separately.
STRICT_RTOL = 1e-6
PRISM_TEST_RTOL = 1e-5


def compare(got, expected, rtol: float = PRISM_TEST_RTOL) -> tuple[str, str]:
    """("pass", "") within `STRICT_RTOL`; ("pass", "loose: ...") within
    PRISM's test tolerance only; else ("fail", why)."""
    if isinstance(expected, bool):
        ok = isinstance(got, (bool,)) or hasattr(got, "dtype")
        return (
            ("pass", "")
            if ok and bool(got) == expected
            else ("fail", f"expected {expected}, got {got!r}")
        )
    if isinstance(expected, tuple) and expected[0] == "approx":
        _, value, digits = expected
        tol = 0.5 * 10.0 ** (-digits) * 1.0000001
        ok = isinstance(got, (int, float)) and abs(got - value) <= max(
            tol, rtol * abs(value)
        )
        return ("pass", "") if ok else ("fail", f"expected ~{value}, got {got!r}")
    if isinstance(got, bool):
        return "fail", f"expected {expected}, got boolean {got}"
    got = float(got)
    if math.isnan(expected) or math.isnan(got):
        ok = math.isnan(expected) and math.isnan(got)
    elif math.isinf(expected) or math.isinf(got):
        ok = expected == got
    else:
        err = abs(got - expected)
        if err <= STRICT_RTOL * abs(expected) + 1e-12:
            return "pass", ""
        ok = err <= rtol * abs(expected) + 1e-12
        if ok:
            return "pass", f"loose: rel. err {err / abs(expected):.2e} > 1e-6"
    if ok:
        return "pass", ""
    err = abs(got - expected) / abs(expected) if expected else abs(got)
    return "fail", f"expected {expected!r}, got {got!r} (rel. err {err:.2e})"
