"""Paths shared by the Python tests. Real-model tests FAIL (never skip) when a file is missing."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def ember_binary():
    path = os.environ.get("EMBER_BINARY") or os.path.join(SOURCE_DIR, "build", "ember")
    if not os.path.exists(path):
        raise AssertionError(f"ember binary missing: {path} (build it, or set EMBER_BINARY)")
    return path


def shared_path(relative):
    base = os.environ.get("EMBER_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
    path = os.path.join(base, relative)
    if not os.path.exists(path):
        raise AssertionError(f"required shared file missing: {path}")
    return path


def run_ember(*args, check=True):
    proc = subprocess.run([ember_binary(), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"ember {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc
