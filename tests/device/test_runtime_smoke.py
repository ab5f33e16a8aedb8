"""Self-checks for tests/device/_util.py; runs on CPython and MicroPython."""
from _util import IS_MICROPYTHON, no_alloc, raises, unhex


def _raise_value_error():
    raise ValueError("boom")


def _kwargs(a, bad=False):
    if bad:
        raise TypeError("bad")
    return a


def _return_quietly():
    return 1


def test_raises_returns_matching_exception():
    e = raises(ValueError, _raise_value_error)
    assert isinstance(e, ValueError)
    assert e.args == ("boom",)


def test_raises_accepts_tuple_and_subclass():
    assert isinstance(raises((KeyError, ValueError), _raise_value_error), ValueError)
    assert isinstance(raises(Exception, _raise_value_error), ValueError)


def test_raises_passes_arguments():
    e = raises(ValueError, int, "not a number")
    assert isinstance(e, ValueError)
    e = raises(TypeError, _kwargs, 1, bad=True)
    assert isinstance(e, TypeError)
    raises(AssertionError, raises, TypeError, _kwargs, 1, bad=False)


def test_raises_fails_when_nothing_raised():
    e = raises(AssertionError, raises, ValueError, _return_quietly)
    assert "did not raise" in str(e)


def test_raises_fails_on_other_exception_type():
    e = raises(AssertionError, raises, KeyError, _raise_value_error)
    assert "ValueError" in str(e)


def test_unhex():
    assert unhex("30 31 00") == b"01\x00"
    assert unhex("") == b""
    assert unhex("ff0A") == b"\xff\x0a"
    assert unhex(" 10\n 02 \t") == b"\x10\x02"
    assert isinstance(unhex("00"), bytes)
    raises(ValueError, unhex, "0")
    raises(ValueError, unhex, "zz")


def _add():
    x = 1 + 2
    return x


def _sum3(a, b, c):
    return a + b + c


_PREALLOCATED = ValueError("preallocated")


def _raise_preallocated():
    # Raising a freshly built instance would itself allocate under MicroPython.
    raise _PREALLOCATED


def _build_list():
    return [1, 2, 3] + [4]


def test_no_alloc_passes_without_allocation():
    assert no_alloc(_add) == 3
    assert no_alloc(_sum3, 1, 2, 3) == 6


def test_no_alloc_detects_allocation():
    if IS_MICROPYTHON:
        e = raises(AssertionError, no_alloc, _build_list)
        assert "_build_list" in str(e)
        # The heap must be unlocked again afterwards.
        assert [1] + [2] == [1, 2]
    else:
        assert no_alloc(_build_list) == [1, 2, 3, 4]


def test_no_alloc_propagates_other_exceptions():
    assert raises(ValueError, no_alloc, _raise_preallocated) is _PREALLOCATED
    assert [0] * 3 == [0, 0, 0]  # heap unlocked again
