"""What the bench scripts say about the machine a figure came from (every speed figure names
the CPU): one reading of /proc/cpuinfo for all of them."""
import platform


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
