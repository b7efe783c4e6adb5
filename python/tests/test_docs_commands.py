"""The `ember_kv.llamacpp_rounding` command that README.md and docs/numerics.md print runs as
written, from the checkout (issue 32). Failed before: README's `python3 -m
ember_kv.llamacpp_rounding` had no package on the path and no arguments, and docs/numerics.md's
paths were wrong from the `python/` directory it named."""
import os
import re
import subprocess
import sys
import unittest

from tests.support import SOURCE_DIR, shared_path


def documented_commands(doc):
    """Every `...` span in DOC that runs the module, optional [...] parts dropped."""
    with open(os.path.join(SOURCE_DIR, doc), encoding="utf-8") as f:
        text = f.read()
    spans = re.findall(r"`([^`]*-m ember_kv\.llamacpp_rounding[^`]*)`", text)
    return [" ".join(re.sub(r"\[[^\]]*\]", " ", s).split()) for s in spans]


class DocsCommandsTest(unittest.TestCase):
    def test_rounding_commands_run_as_documented(self):
        shared = os.path.dirname(shared_path("models"))
        for doc in ("README.md", "docs/numerics.md"):
            commands = documented_commands(doc)
            self.assertTrue(commands, doc)
            for cmd in commands:
                # The docs' python3 is Debian's (this interpreter), their ../shared the shared folder.
                run = re.sub(r"(^| )python3 ", rf"\1{sys.executable} ", cmd).replace("../shared/", shared + "/")
                r = subprocess.run(["bash", "-c", run], cwd=SOURCE_DIR, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, f"{doc}: {cmd}\n{r.stdout}{r.stderr}")
                self.assertIn("worst-row mean", r.stdout, f"{doc}: {cmd}")


if __name__ == "__main__":
    unittest.main()
