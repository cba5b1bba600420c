"""`looptool tune --json` output, read by the experiment scripts (imported, not run)."""
import json
import sys


def load(path):
    """benchmark name -> its result; exits naming the file when it is not tune's --json output.
    One benchmark's output is the result itself; several are {"results": [...]} (or a list)."""
    try:
        doc = json.load(open(path))
        rows = doc if isinstance(doc, list) else doc.get("results", [doc])
        return {r["benchmark"]: r for r in rows}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"error: {path}: not tune's --json output ({e})")
