"""Reading source files: `jaxmc.lang.read_source` and the entry points that
use it (`load_model`, `load_properties`, the command line)."""

import subprocess
import sys

import pytest

import jaxmc
from jaxmc.errors import JaxmcError, PrismSyntaxError, SourceFileNotFound
from jaxmc.lang import parse_model_file, parse_properties_file, read_source


MODEL = "dtmc\nmodule m\n  s : [0..1] init 0;\n  [] s=0 -> (s'=1);\nendmodule\n"


def test_reads_utf8_and_drops_a_byte_order_mark(tmp_path):
    f = tmp_path / "m.pm"
    f.write_bytes("// café\n".encode() + MODEL.encode())
    assert read_source(f) == "// café\n" + MODEL
    f.write_bytes(b"\xef\xbb\xbf" + MODEL.encode())
    assert read_source(str(f)) == MODEL


@pytest.mark.parametrize(
    ("data", "line", "col", "byte"),
    [
        (b"dtmc\n// caf\xe9\n", 2, 7, "0xe9"),
        (b"\xff", 1, 1, "0xff"),
        ("dtmc // é\nconst int N = 3; ".encode() + b"\x80", 2, 18, "0x80"),
        ("é".encode() + b"x\xc3(", 1, 3, "0xc3"),
    ],
)
def test_non_utf8_is_a_located_syntax_error(tmp_path, data, line, col, byte):
    f = tmp_path / "m.pm"
    f.write_bytes(data)
    with pytest.raises(PrismSyntaxError) as e:
        read_source(f)
    err = e.value
    assert (err.span.file, err.span.line, err.span.column) == (str(f), line, col)
    assert f"file is not UTF-8 text (byte {byte})" in str(err)
    assert err.hint and "UTF-8" in err.hint
    assert str(err).startswith(f"{f}:{line}:{col}: syntax error:")


def test_missing_file_is_a_jaxmc_error_and_a_file_not_found_error(tmp_path):
    missing = tmp_path / "nope.pm"
    with pytest.raises(SourceFileNotFound) as e:
        read_source(missing)
    assert isinstance(e.value, JaxmcError) and isinstance(e.value, FileNotFoundError)
    assert str(missing) in str(e.value) and e.value.hint
    assert e.value.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        jaxmc.load_model(missing)


def test_a_directory_is_a_jaxmc_error(tmp_path):
    with pytest.raises(JaxmcError, match="is a directory"):
        read_source(tmp_path)


def test_entry_points_use_read_source(tmp_path):
    bad = tmp_path / "bad.pm"
    bad.write_bytes(MODEL.encode().replace(b"init 0", b"init 0 // \xfe"))
    for load in (jaxmc.load_model, parse_model_file):
        with pytest.raises(PrismSyntaxError, match=r"bad\.pm:3:.*UTF-8.*0xfe"):
            load(bad)
    good = tmp_path / "m.pm"
    good.write_text(MODEL)
    model = jaxmc.load_model(good)
    props = tmp_path / "p.props"
    props.write_bytes(b'P=? [ F s=1 ];\n"\xff": P=? [ F s=0 ];\n')
    for load in (lambda p: jaxmc.load_properties(p, model), parse_properties_file):
        with pytest.raises(PrismSyntaxError, match=r"p\.props:2:2:.*byte 0xff"):
            load(props)
    with pytest.raises(SourceFileNotFound):
        jaxmc.load_properties(tmp_path / "none.props", model)


def test_cli_reports_non_utf8_properties_with_location(tmp_path):
    model = tmp_path / "m.pm"
    model.write_text(MODEL)
    props = tmp_path / "p.props"
    props.write_bytes(b"P=? [ F s=1 ];\n\xe9\n")
    r = subprocess.run(
        [sys.executable, "-m", "jaxmc", str(model), str(props)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert f"{props}:2:1: syntax error: file is not UTF-8 text (byte 0xe9)" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "jaxmc", str(model), str(tmp_path / "none.props")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "none.props` does not exist" in r.stderr
    assert "Traceback" not in r.stderr
