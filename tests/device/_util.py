"""Assertion helpers shared by device tests.

Every module in tests/device/ must run unchanged on CPython (under pytest) and
on the MicroPython unix port (via _mprunner.py), so this file uses only what
both implementations provide: no typing, no f-strings with '=', no pytest.
"""
import sys

IS_MICROPYTHON = sys.implementation.name == "micropython"

if IS_MICROPYTHON:
    import gc
    import micropython


def _name(obj):
    return getattr(obj, "__name__", None) or repr(obj)


def raises(exc_type, fn, *args, **kwargs):
    """Call fn(*args, **kwargs); return the exception it raised.

    Fails with AssertionError if fn returns normally or raises something that
    is not an instance of exc_type (which may be a tuple of types).
    """
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    except Exception as e:  # wrong type: report it, keep the original as context
        raise AssertionError(
            "%s raised %s(%r), expected %s"
            % (_name(fn), type(e).__name__, e, _expected_name(exc_type))
        )
    raise AssertionError(
        "%s did not raise %s" % (_name(fn), _expected_name(exc_type))
    )


def _expected_name(exc_type):
    if isinstance(exc_type, tuple):
        return " or ".join(t.__name__ for t in exc_type)
    return exc_type.__name__


def no_alloc(fn, *args):
    """Call fn(*args) and assert it does not allocate on the heap.

    Under MicroPython the heap is locked for the call, so any allocation
    raises MemoryError, reported as AssertionError. Under CPython (which
    cannot check this) fn is simply called. Returns fn's result.

    Note that on MicroPython raising an exception *instance* built inside fn
    (raise ValueError("x")) allocates; raise a class or a preallocated instance.
    Returning a new object (bytes, tuple, big int, float) allocates too.
    """
    if not IS_MICROPYTHON:
        return fn(*args)
    n = len(args)
    gc.collect()
    micropython.heap_lock()
    try:
        # A star-call (fn(*args)) itself allocates on MicroPython, so spell out
        # the common arities; more than 6 arguments may report a false positive.
        if n == 0:
            result = fn()
        elif n == 1:
            result = fn(args[0])
        elif n == 2:
            result = fn(args[0], args[1])
        elif n == 3:
            result = fn(args[0], args[1], args[2])
        elif n == 4:
            result = fn(args[0], args[1], args[2], args[3])
        elif n == 5:
            result = fn(args[0], args[1], args[2], args[3], args[4])
        elif n == 6:
            result = fn(args[0], args[1], args[2], args[3], args[4], args[5])
        else:
            result = fn(*args)
    except MemoryError:
        micropython.heap_unlock()
        raise AssertionError("heap allocation in %s" % _name(fn))
    except BaseException:
        micropython.heap_unlock()
        raise
    micropython.heap_unlock()
    return result


_HEXDIGITS = "0123456789abcdef"


def unhex(s):
    """'30 31 00' -> b'01\\x00'. Whitespace anywhere is ignored; case-insensitive."""
    digits = []
    for ch in s.lower():
        if ch in " \t\r\n":
            continue
        v = _HEXDIGITS.find(ch)
        if v < 0:
            raise ValueError("bad hex digit %r in %r" % (ch, s))
        digits.append(v)
    if len(digits) % 2:
        raise ValueError("odd number of hex digits in %r" % (s,))
    out = bytearray(len(digits) // 2)
    for i in range(len(out)):
        out[i] = (digits[2 * i] << 4) | digits[2 * i + 1]
    return bytes(out)
