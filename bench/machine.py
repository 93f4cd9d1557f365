"""The machine description and run time every Python benchmark writes into its JSON, as the C++
benchmarks do (bench/bench_util.h). Standard library only, and nothing happens on import (unlike
bench/peers.py, which sets the thread environment)."""
import datetime
import platform


def measured_utc():
    """When the run happened (UTC), "2026-11-23 01:43"."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
