"""A PEP 517 build backend with no dependency beyond the standard library, so that
`pip install ./python` works offline (pyproject.toml says why). It packs ember_kv/*.py into a
pure-Python wheel (py3-none-any) and an sdist; name, version, description, requires-python
and dependencies come from pyproject.toml's [project] table, the one place they are stated.
"""
import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "ember_kv"


def _project():
    with open(os.path.join(_HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _sources():
    """The package's files, relative to this directory, sorted (a reproducible archive)."""
    out = []
    for root, dirs, files in os.walk(os.path.join(_HERE, _PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.relpath(os.path.join(root, f), _HERE) for f in files if f.endswith(".py")]
    return sorted(out)


def _read(rel):
    with open(os.path.join(_HERE, rel), "rb") as f:
        return f.read()


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '')}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    dist_info = f"{p['name']}-{p['version']}.dist-info"
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    files = [(rel, _read(rel)) for rel in _sources()]
    files.append((f"{dist_info}/METADATA", _metadata(p).encode()))
    files.append((f"{dist_info}/WHEEL",
                  b"Wheel-Version: 1.0\nGenerator: ember_kv_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    record = "\n".join(_record_line(n, d) for n, d in files) + f"\n{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, d, zipfile.ZIP_DEFLATED)
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    members = ["pyproject.toml", "ember_kv_build.py"] + _sources()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in members:
            data = _read(rel)
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
        pkg_info = _metadata(p).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mode = len(pkg_info), 0o644
        t.addfile(info, io.BytesIO(pkg_info))
    return name
