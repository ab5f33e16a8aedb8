"""Run one function of a module on tests/mp_api (or examples/) in a fresh
interpreter, normally the MicroPython unix port:

    MICROPYPATH=firmware:tests/mp_api:examples:.frozen \
        micropython tests/mp_api/mp_run.py MODULE FUNC '[json args]'

(CPython works too, with PYTHONPATH instead.) Prints "@@RESULT <json>" with
what FUNC returned and exits 0; on an exception prints the traceback and exits
1. tests/mp_api/apihost.py starts it and reports both.
"""
import sys
import json


def main(argv):
    mod = __import__(argv[1])
    fn = getattr(mod, argv[2])
    args = json.loads(argv[3]) if len(argv) > 3 else []
    try:
        r = fn(*args)
    except Exception as e:
        if hasattr(sys, "print_exception"):
            sys.print_exception(e, sys.stdout)
        else:
            import traceback
            traceback.print_exc(file=sys.stdout)
        sys.exit(1)
    print("@@RESULT " + json.dumps(r))


main(sys.argv)
