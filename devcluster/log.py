"""Progress output goes to stderr so that stdout stays clean for `eval "$(... up)"`."""

import sys
import time


def progress(message: str) -> None:
    """Print one timestamped progress line to stderr."""
    print(f"[devcluster {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
