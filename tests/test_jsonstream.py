"""The streaming JSON-array reader gives exactly json.loads' answer, whatever the chunk size, and the same errors."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vbench_async.jsonstream import iter_json_array
from vbench_async.samples import read_records

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def _as_list(text: str) -> list:
    value = json.loads(text)
    return value if isinstance(value, list) else [value]


@settings(max_examples=150, deadline=None)
@given(value=st.lists(JSON, max_size=8) | JSON, indent=st.sampled_from([None, 0, 2]),
       chunk=st.integers(min_value=1, max_value=40))
def test_same_values_as_json_loads_at_any_chunk_size(value, indent, chunk):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    assert list(iter_json_array(io.StringIO(text), chunk)) == _as_list(text)


@pytest.mark.parametrize("text", ["12345678901234567890", "[1.5e+10, -2.5E-3, 1.0]", "[1234, 56]"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 5])
def test_numbers_cut_by_the_window_are_read_whole(text, chunk):
    # "1.|5" and "1.5e+|3" decode as shorter numbers if the reader trusts the edge of its window.
    assert list(iter_json_array(io.StringIO(text), chunk)) == _as_list(text)


@pytest.mark.parametrize("bad", ["", "   ", "[1,2", "[1 2]", "[1,]", "[1] x", '{"a":1} {}', '[{"a":}]', "[", "]"])
@pytest.mark.parametrize("chunk", [1, 3, 1 << 18])
def test_bad_syntax_raises(bad, chunk):
    with pytest.raises(json.JSONDecodeError):
        list(iter_json_array(io.StringIO(bad), chunk))


def test_error_names_the_element(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('[{"problem_type": "x"}, {"problem_type": }]')
    with pytest.raises(Exception, match=r"array element #1"):
        read_records(path)
