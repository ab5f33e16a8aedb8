"""python -m pipeline {audit,collect,stream,gen} ... (see --help)."""
import sys

from pipeline.cli import main

sys.exit(main())
