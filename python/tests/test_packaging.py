"""`pip install ./python` with Debian's python3 and no network (issue 32): pyproject.toml and
its stdlib-only build backend (ember_kv_build.py). Failed before: there was no pyproject.toml
or setup.py, and pip refused the directory."""
import base64
import hashlib
import os
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


if __name__ == "__main__":
    unittest.main()
