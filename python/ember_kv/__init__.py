"""ember_kv: read and write KVC1 containers (docs/formats/kvc1.md) and convert them to and from
the Hugging Face cache layout. numpy only; `transformers` is used when importable."""
from .kvc1 import KVC1Error, Kvc1, Tensor, read_kvc1, write_kvc1, canonical_json  # noqa: F401
