"""Runs tests/data/query-cases.json through the official SDK (the shared runner)."""
import os
import runpy
import sys

sys.argv = ["run_query_cases.py", "--endpoint", os.environ["STRATA_ENDPOINT"], "-v"]
runpy.run_path(os.environ["STRATA_QUERY_CASES"], run_name="__main__")
