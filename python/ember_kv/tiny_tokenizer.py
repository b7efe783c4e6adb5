"""A tiny byte-level BPE tokenizer.json (GPT-2 style: 256 byte tokens, a few merges, one
special token), for tests and checks that need a Hugging Face tokenizer of a small synthetic
model's vocabulary size. ember's tokenizer.json loader reads it as `bpe:gpt2`."""


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (byte-level BPE vocabularies use it)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def gpt2_tokenizer_json(n_tokens):
    """A small byte-level BPE tokenizer.json: 256 byte tokens, merges, one special token."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    sp = b2u[ord(" ")]
    pairs = [(sp, c) for c in "tasowbcmdfhilnpryegu"] + [tuple(p) for p in ["th", "he", "in", "er", "an", "re", "on",
                                                                            "at", "en", "nd", "or", "es", "is", "ed"]]
    for a, b in pairs:
        if len(vocab) >= n_tokens - 1:
            break
        vocab[a + b] = len(vocab)
        merges.append(f"{a} {b}")
    special = {"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": False, "special": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [special], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}
