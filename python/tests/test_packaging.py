"""`pip install ./python` with Debian's python3 and no network (issue 32): pyproject.toml and
its stdlib-only build backend (ember_kv_build.py). Failed before: there was no pyproject.toml
or setup.py, and pip refused the directory. README.md's two install lines are run as written
(skipped, naming the Debian package, where python3-venv or python3-pip is missing)."""
import base64
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackagingTest(unittest.TestCase):
    def test_wheel_holds_every_module_and_a_valid_record(self):
        sys.path.insert(0, PYTHON_DIR)
        try:
            import ember_kv_build
        finally:
            sys.path.remove(PYTHON_DIR)
        with tempfile.TemporaryDirectory() as d:
            name = ember_kv_build.build_wheel(d)
            self.assertEqual(name, "ember_kv-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                modules = {f"ember_kv/{f}" for f in os.listdir(os.path.join(PYTHON_DIR, "ember_kv")) if f.endswith(".py")}
                self.assertLessEqual(modules, names)
                meta = z.read("ember_kv-0.1.0.dist-info/METADATA").decode()
                self.assertIn("Name: ember_kv\n", meta)
                self.assertIn("Requires-Dist: numpy\n", meta)
                for line in z.read("ember_kv-0.1.0.dist-info/RECORD").decode().splitlines():
                    path, digest, size = line.split(",")
                    if not digest:
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual(digest, "sha256=" + want, path)
                    self.assertEqual(int(size), len(data), path)

    def test_pip_installs_offline_into_a_venv(self):
        # A venv that sees Debian's numpy; pip from the system python, told not to use an index.
        require_module("pip", "python3-pip")
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "--no-index", PYTHON_DIR],
                               capture_output=True, text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Imported from the venv, not from the source tree (cwd is elsewhere, no PYTHONPATH).
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            r = subprocess.run([py, "-c", "import ember_kv.llamacpp_rounding, ember_kv; print(ember_kv.__file__)"],
                               capture_output=True, text=True, cwd=d, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(venv), r.stdout)

    def test_readme_install_commands_run_as_written(self):
        # README.md's "Install it offline into a venv" block, line by line, with Debian's python3
        # (this interpreter) and the checkout's ./python; then the package's CLI from the venv.
        require_module("ensurepip", "python3-venv")
        lines = readme_install_block()
        self.assertTrue(any("pip install --no-index ./python" in l for l in lines), lines)
        self.assertTrue(any(l.startswith(".venv/bin/python3 -m ember_kv.") for l in lines), lines)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the venv holds
        with tempfile.TemporaryDirectory() as d:
            for line in lines:
                run = re.sub(r"(^| )python3 ", rf"\1{sys.executable} ", line).replace("./python", PYTHON_DIR)
                r = subprocess.run(["bash", "-c", run], cwd=d, env=env, capture_output=True, text=True, timeout=300)
                self.assertEqual(r.returncode, 0, f"{line}\n{r.stdout}{r.stderr}")
            self.assertIn("usage: python3 -m ember_kv.torch_gate", r.stdout)
            r = subprocess.run([os.path.join(d, ".venv", "bin", "python3"), "-c", "import ember_kv; print(ember_kv.__file__)"],
                               cwd=d, env=env, capture_output=True, text=True)
            self.assertTrue(r.stdout.startswith(os.path.join(d, ".venv")), r.stdout + r.stderr)


def require_module(module, debian_package):
    """Skips (naming the package) where this machine lacks it; scripts/install-deps.sh installs it
    on CI, so there the test runs."""
    if importlib.util.find_spec(module) is None:
        raise unittest.SkipTest(f"{sys.executable} has no {module} module: install Debian's {debian_package} "
                                f"(scripts/install-deps.sh does)")


def readme_install_block():
    """The indented code block of README.md that installs the package (`pip install`)."""
    with open(os.path.join(os.path.dirname(PYTHON_DIR), "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"(?:^    .*\n)+", f.read(), re.M)
    block = next(b for b in blocks if "pip install" in b)
    return [l.strip() for l in block.splitlines() if l.strip()]

if __name__ == "__main__":
    unittest.main()
