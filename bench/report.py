"""What the bench scripts print: the CPU a figure came from (every speed figure names it), the
names of files with control characters escaped, and a failed run as one line with its exit
status."""
import platform
import sys


def cpu_name():
    """/proc/cpuinfo's first `model name`, else what platform knows, else "unknown CPU"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def shown(text):
    """A path or name as printed: control characters escaped, never raw."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class BenchError(Exception):
    """A run that did not give its figures: one line on stderr, exit status 1, or 2 for flags
    the run cannot use (as argparse's own errors)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def run_main(prog, main):
    """main(), with a BenchError printed as 'prog: message' and its status as the exit status."""
    try:
        main()
    except BenchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(e.status)
