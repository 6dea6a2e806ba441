"""One constant setting for the model and its properties (PRISM's `-const`),
its errors, and checked properties passed by themselves."""

import re
import sys

import pytest

import jaxmc
from jaxmc.cli import main
from jaxmc.errors import SemanticError
from jaxmc.semantics.constants import MissingConstantsError


MODEL = """dtmc
const double p;
const int N;
const int D = 1;
module m
  x : [0..N] init 0;
  [] x<N -> p : (x'=x+D) + 1-p : (x'=x);
endmodule
label "done" = x=N;
"""

PROPS = """const int k;
const int J = 2;
P=? [ F<=k "done" ];
"reach": P>=0.5 [ F<=k "done" ];
"reach" & true;
"""


@pytest.fixture
def files(tmp_path):
    model = tmp_path / "m.pm"
    model.write_text(MODEL)
    props = tmp_path / "m.props"
    props.write_text(PROPS)
    return model, props


def test_one_setting_serves_model_and_properties(files):
    model_path, props_path = files
    model = jaxmc.load_model(model_path, "N=2,p=0.5,k=3")
    assert dict(model.constant_setting).keys() == {"N", "p", "k"}
    props = jaxmc.load_properties(props_path, model)
    assert props.constants == {"k": 3, "J": 2}
    # P(x reaches 2 within 3 steps), each step moving with probability 1/2
    assert float(jaxmc.solve(model, props[0])) == pytest.approx(0.5)
    # an explicit setting adds to / overrides the model's for this file
    props5 = jaxmc.load_properties(props_path, model, {"k": 5})
    assert props5.constants["k"] == 5
    assert float(jaxmc.solve(model, props5[0])) == pytest.approx(1 - 6 / 32)
    # the model's own undefined constants may be repeated with the same value
    assert jaxmc.load_properties(props_path, model, "N=2,p=0.5").constants["k"] == 3


def test_properties_constant_given_only_to_load_properties(files):
    model_path, props_path = files
    model = jaxmc.load_model(model_path, {"N": 2, "p": 0.5})
    with pytest.raises(MissingConstantsError, match="undefined constant `k`") as e:
        jaxmc.load_properties(props_path, model)
    assert e.value.names == ("k",)
    assert 'constants={"k": ...}' in str(e.value) and "--const" not in str(e.value)
    assert jaxmc.load_properties(props_path, model, "k=1").constants["k"] == 1


def test_checked_property_passed_by_itself(files):
    """A property from `load_properties` carries its file's constants and the
    properties it names ("reach"), in `check` and `solve` alike."""
    model_path, props_path = files
    model = jaxmc.load_model(model_path, "N=2,p=0.5,k=3")
    props = jaxmc.load_properties(props_path, model)
    assert props[2].properties is props
    assert jaxmc.check(model, props[1]).value is True or bool(
        jaxmc.check(model, props[1]).value
    )
    assert bool(jaxmc.solve(model, props[2])) is True
    assert float(jaxmc.check(model, props[0]).value) == pytest.approx(0.5)
    # `properties=` still looks names and indices up
    assert bool(jaxmc.check(model, "reach", properties=props).value)
    assert float(jaxmc.check(model, 0, properties=props).value) == pytest.approx(0.5)


def test_checked_property_on_the_parametric_path(files):
    model_path, props_path = files
    model = jaxmc.load_model(model_path, "N=2,k=3", parameters=("p",))
    props = jaxmc.load_properties(props_path, model)
    v = jaxmc.solve(model, props[0], params={"p": 0.5})
    assert float(v) == pytest.approx(0.5)
    swept = jaxmc.sweep(model, props[0], params={"p": [0.5, 1.0]})
    assert swept.tolist() == pytest.approx([0.5, 1.0])


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "N=2,p=0.5,k=3,D=4",
            "constant `D` is defined in the file, so it cannot be given a value",
        ),
        (
            "N=2,p=0.5,k=3,J=4",
            "constant `J` is defined in the file, so it cannot be given a value",
        ),
        (
            "N=2,p=0.5,k=3,Q=3",
            "unknown constant `Q`: neither the model nor the properties declare it",
        ),
        ("N=2,p=0.5,kk=3", "unknown constant `kk`"),
    ],
)
def test_setting_names_are_checked(files, setting, message):
    model_path, props_path = files
    with pytest.raises(SemanticError, match=re.escape(message)) as e:
        model = jaxmc.load_model(model_path, setting)
        jaxmc.load_properties(props_path, model)
    if "unknown" in message:
        assert "the undefined constants are: `p`, `N`, `k`" in str(e.value)
    if "kk" in setting:
        assert "did you mean `k`?" in str(e.value)


def test_unknown_name_kept_until_the_properties(files):
    """`load_model` cannot know the properties: it keeps names the model does
    not declare; a property string checked without any properties file that
    declares them reports them."""
    model_path, props_path = files
    model = jaxmc.load_model(model_path, "N=2,p=0.5,k=3")
    assert model.build().num_states == 3
    with pytest.raises(SemanticError, match="unknown constant `k`"):
        jaxmc.check(model, 'P=? [ F "done" ]')
    jaxmc.load_properties(props_path, model)  # declares k
    assert float(jaxmc.solve(model, 'P=? [ F "done" ]')) == pytest.approx(1.0)


def test_model_constant_cannot_change_for_the_properties(files):
    model_path, props_path = files
    model = jaxmc.load_model(model_path, "N=2,p=0.5,k=3")
    with pytest.raises(
        SemanticError,
        match="was set to 2 when the model was loaded; it cannot be changed to 3",
    ):
        jaxmc.load_properties(props_path, model, "N=3")
    with pytest.raises(SemanticError, match="`D` is defined in the model"):
        jaxmc.load_properties(props_path, model, "D=3")


@pytest.mark.parametrize(
    "setting, message",
    [
        ("N==3,p=0.5", "invalid constant definition `N==3`: more than one `=`"),
        ("=3", "invalid constant definition `=3`: a name is missing"),
        ("N=", "invalid constant definition `N=`: a value is missing"),
        ("N", "invalid constant definition `N`: `=` is missing"),
        ("N=abc,p=0.5", "value `abc` for constant `N` is not a valid integer"),
        ("N=2,p=x", "value `x` for constant `p` is not a valid double"),
        (
            "N=1:3,p=0.5",
            "constant `N` is given a range `1:3`, but here each constant takes "
            "one value",
        ),
        ({"N": [1, 2], "p": 0.5}, "invalid value [1, 2] for constant `N`"),
        ({"N": "2=3", "p": 0.5}, "invalid value '2=3' for constant `N`"),
        (42, "constants should be a string"),
    ],
)
def test_malformed_settings(files, setting, message):
    model_path, _ = files
    with pytest.raises(SemanticError, match=re.escape(message)) as e:
        jaxmc.load_model(model_path, setting)
    assert e.value.hint


def test_mapping_values_of_numpy_types(files):
    import numpy as np

    model_path, _ = files
    model = jaxmc.load_model(model_path, {"N": np.int64(2), "p": np.float64(0.5)})
    assert model.constants["N"] == 2 and model.constants["p"] == 0.5


def test_missing_constant_hints_speak_the_api(files):
    model_path, _ = files
    with pytest.raises(MissingConstantsError) as e:
        jaxmc.load_model(model_path)
    msg = str(e.value)
    assert e.value.names == ("p", "N")
    assert 'constants={"p": ..., "N": ...} to jaxmc.load_model' in msg
    assert 'parameters=("p",)' in msg and "--const" not in msg
    assert re.search(r"m\.pm:2:1: error: undefined constants `p`, `N`", msg)


def test_cli_keeps_const_hint_and_reports_setting_errors(files, capsys):
    model_path, props_path = files
    assert main([str(model_path), str(props_path)]) == 1
    err = capsys.readouterr().err
    assert "hint: use --const p=...,N=..." in err and "constants=" not in err
    # a properties constant: the per-property error says --const too
    assert main([str(model_path), str(props_path), "--const", "N=2,p=0.5"]) == 1
    out, err = capsys.readouterr()
    assert "use --const k=..." in err and "constants=" not in err
    # unknown names, with and without properties
    for extra in ([str(props_path)], [], ["--prop", 'P=? [ F "done" ]']):
        assert main([str(model_path), *extra, "--const", "N=2,p=0.5,k=1,Q=3"]) == 1
        err = capsys.readouterr().err
        assert (
            re.search(r"error: unknown constants? (`k`, )?`Q`", err)
            and "Traceback" not in err
        )
    # experiments over a range still run, model and properties constants mixed
    assert (
        main(
            [
                str(model_path),
                str(props_path),
                "--property",
                "1",
                "--const",
                "N=2,p=0.5,k=1:1:3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = [ln.split("\t") for ln in out.splitlines() if re.match(r"2\t0\.5\t\d", ln)]
    assert [r[2] for r in rows] == ["1", "2", "3"]
    assert [float(r[3]) for r in rows] == pytest.approx([0.0, 0.25, 0.5])


def test_cli_subprocess_exit_status(files):
    import subprocess

    model_path, _ = files
    r = subprocess.run(
        [sys.executable, "-m", "jaxmc", str(model_path), "--const", "N=2,p=0.5,D=2"],
        capture_output=True,
        text=True,
    )
    assert (
        r.returncode == 1
        and "`D` is defined in the file" in r.stderr
        and "Traceback" not in r.stderr
    )
