"""Run one device test module under MicroPython.

Usage (from the repo root):
    MICROPYPATH=firmware:.:tests/device micropython tests/device/_mprunner.py MODULE [CASE...]

MODULE is an importable name (test_codec_vectors) or a file name
(test_codec_vectors.py). Without CASE arguments every top-level function whose
name starts with "test_" is run, sorted by name. Output, one block per case:

    @@RUN name              (before each case; names the culprit if the VM dies)
    @@PASS name
    @@FAIL name
    <traceback>
    @@END name

If the module cannot be imported, "@@IMPORTERROR" and the traceback are
printed instead. Always exits 0 once the report is printed; the caller
(tests/test_micropython.py) decides what passed.
"""
import sys
import gc


def _modname(arg):
    if arg.endswith(".py"):
        arg = arg[:-3]
    i = arg.rfind("/")
    if i >= 0:
        arg = arg[i + 1:]
    return arg


def main(argv):
    if len(argv) < 2:
        print("usage: micropython _mprunner.py MODULE [CASE...]")
        sys.exit(2)
    name = _modname(argv[1])
    try:
        mod = __import__(name)
    except BaseException as e:  # SyntaxError, ImportError, anything at import time
        print("@@IMPORTERROR")
        sys.print_exception(e, sys.stdout)
        return
    wanted = argv[2:]
    if wanted:
        cases = wanted
    else:
        cases = sorted(
            n for n in dir(mod) if n.startswith("test_") and callable(getattr(mod, n))
        )
    for case in cases:
        fn = getattr(mod, case, None)
        gc.collect()
        # Lets the caller name the case that was running if the process dies.
        print("@@RUN " + case)
        if fn is None:
            print("@@FAIL " + case)
            print("no such test function in " + name)
            print("@@END " + case)
            continue
        try:
            fn()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            print("@@FAIL " + case)
            sys.print_exception(e, sys.stdout)
            print("@@END " + case)
        else:
            print("@@PASS " + case)


main(sys.argv)
