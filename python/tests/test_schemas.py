"""Every example under schemas/examples/ is judged by Python's jsonschema (draft 2020-12) and by
`ember contract validate`, and both must agree with the file's name (.valid. / .invalid.)."""
import glob
import json
import os
import unittest

import jsonschema

from tests.support import SOURCE_DIR, run_ember

SCHEMAS = os.path.join(SOURCE_DIR, "schemas")


class SchemaExamples(unittest.TestCase):
    def test_schemas_are_valid_2020_12(self):
        files = sorted(glob.glob(os.path.join(SCHEMAS, "*.schema.json")))
        self.assertGreaterEqual(len(files), 5)
        for f in files:
            schema = json.load(open(f))
            self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", f)
            jsonschema.Draft202012Validator.check_schema(schema)

    def test_examples_agree_with_names_and_with_ember(self):
        examples = sorted(glob.glob(os.path.join(SCHEMAS, "examples", "*.json")))
        self.assertGreaterEqual(len(examples), 15)
        for path in examples:
            name = os.path.basename(path)
            stem, verdict = name.split(".")[0], name.split(".")[1]
            self.assertIn(verdict, ("valid", "invalid"), name)
            schema = json.load(open(os.path.join(SCHEMAS, stem + ".schema.json")))
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(path))))
            self.assertEqual(not errors, verdict == "valid", f"jsonschema on {name}: {[e.message for e in errors]}")
            proc = run_ember("contract", "validate", path, check=False)
            want = 0 if verdict == "valid" else 1
            self.assertEqual(proc.returncode, want, f"ember contract validate {name}:\n{proc.stdout}{proc.stderr}")


if __name__ == "__main__":
    unittest.main()
