#!/usr/bin/env python3
"""Independent reference for the C++ tokenizer.json reader: the Hugging Face `tokenizers` library.

  hf_tokenizers.py probe
      exit 0 if `tokenizers` imports (tests skip otherwise).
  hf_tokenizers.py make SRC OUT [--mb 2.0] [--vocab 4000]
      corpus: the repository's own text files under SRC (sources, docs, configs; sorted, each
      file one document) up to --mb megabytes, plus hand-written Unicode/whitespace/special-token
      cases. Trains byte-level BPE tokenizers on it with `tokenizers` (CPU, no network), one per
      style, each into OUT/NAME/tokenizer.json (+ tokenizer_config.json):
        qwen2   NFC normalizer, Split(Qwen2's regex) + ByteLevel(use_regex=False), ChatML specials,
                an added token with normalized=True (matched after NFC)
        llama3  Split(Llama 3's regex, digits in threes) + ByteLevel, ignore_merges (with a
                vocabulary word no merge reaches), a template post-processor that puts
                <|begin_of_text|> first
        gpt2    ByteLevel(add_prefix_space=True, use_regex=True), an lstrip/rstrip special token,
                a single_word token, a non-special added token that holds spaces
      and OUT/NAME/cases.jsonl, one JSON object a line:
        {"text": T, "ids": encode(T, add_special_tokens=False)}             (every document)
        {"text": T, "ids_with_specials": encode(T, add_special_tokens=True)}  (a few)
        {"decode": IDS, "text": decode(IDS)}  (random ids: specials, split UTF-8, added tokens)
"""
import argparse
import json
import os
import random
import sys

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
EXTENSIONS = (".cpp", ".h", ".cu", ".cuh", ".py", ".md", ".sh", ".yaml", ".txt", ".json")
SKIP_DIRS = {".git", ".venv", "build", "runs", "node_modules", ".device"}

HAND_CASES = [
    "",
    " ",
    "héllo wörld — ünïcödé 日本語のテキスト 中文字符 한국어 émoji 🎉🚀 👩‍👩‍👧 ∑ᵢ xᵢ² ≤ ∞",
    "cafe\u0301 and caf\u00e9, nai\u0308ve and na\u00efve, \u212b vs \u00c5",  # NFC changes these
    "1234567890 3.14159 0x1F 1e-5 12,345,678 ١٢٣ ४५६",
    "a  \t\n\n   b\r\n  \u00a0 c\u3000d   \n\n\n",
    "I'm you're He'LL it's DON'T we've they'd zqxjv zqxjvzqxjv",
    "<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n```cuda\n__global__ void k() {}\n```<|im_end|><|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "foo  <mask>  bar<mask>baz \t<mask>\n",
    "kernelrl xkernelrl kernelrl_ kernelrl. (kernelrl) kernelrlkernelrl",
    "a foo bar b foo barfoo bar",
    "naïve and nai\u0308ve",
    " " * 3000 + "x",
    "=" * 700 + "\n" + "\t" * 300,
    "\x00\x01\x02 control \x7f\x80 chars \u0085 nel",
]


def probe():
    import tokenizers  # noqa: F401
    return 0


def corpus(src, max_bytes):
    docs, total = [], 0
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if not name.endswith(EXTENSIONS):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            if not text or len(text) > 200_000:
                continue
            docs.append(text)
            total += len(text.encode())
            if total >= max_bytes:
                return docs
    return docs


def build(name, docs, vocab):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    if name == "qwen2":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif name == "llama3":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        specials = ["<|endoftext|>"]
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    if name == "qwen2":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.add_tokens([AddedToken("naïve", normalized=True)])
        config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}
    elif name == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])
        config = {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>"}}
    else:
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True)])
        tok.add_tokens([AddedToken("kernelrl", single_word=True, normalized=False),
                        AddedToken(" foo bar", normalized=False)])
        config = {"eos_token": "<|endoftext|>"}
    if name == "llama3":  # Llama 3's tokenizer keeps whole vocabulary words (ignore_merges)
        j = json.loads(tok.to_str())
        j["model"]["ignore_merges"] = True
        # A word no merge sequence reaches: only ignore_merges keeps it whole.
        j["model"]["vocab"]["Ġzqxjv"] = 1 + max(max(j["model"]["vocab"].values()),
                                                 max(t["id"] for t in j["added_tokens"]))
        tok = Tokenizer.from_str(json.dumps(j))
    return tok, config


def make(args):
    docs = corpus(args.src, int(args.mb * 1e6))
    texts = docs + HAND_CASES
    rng = random.Random(7)
    for name in ("qwen2", "llama3", "gpt2"):
        tok, config = build(name, docs, args.vocab)
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        tok.save(os.path.join(out, "tokenizer.json"))
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(config, f)
        n = tok.get_vocab_size(with_added_tokens=True)
        with open(os.path.join(out, "cases.jsonl"), "w", encoding="utf-8") as f:
            encs = tok.encode_batch(texts, add_special_tokens=False)
            for text, enc in zip(texts, encs):
                f.write(json.dumps({"text": text, "ids": enc.ids}, ensure_ascii=False) + "\n")
            for text in HAND_CASES[2:9]:
                ids = tok.encode(text, add_special_tokens=True).ids
                f.write(json.dumps({"text": text, "ids_with_specials": ids},
                                   ensure_ascii=False) + "\n")
            special_ids = [tok.token_to_id(s) for s in ("<|endoftext|>", "<|im_end|>",
                                                        "<|eot_id|>", "<mask>", "kernelrl",
                                                        " foo bar", "naïve")]
            special_ids = [i for i in special_ids if i is not None]
            for k in range(300):
                ids = [rng.randrange(n) for _ in range(rng.randrange(1, 40))]
                if k % 3 == 0:
                    ids.insert(rng.randrange(len(ids) + 1), rng.choice(special_ids))
                f.write(json.dumps({"decode": ids, "text": tok.decode(ids)},
                                   ensure_ascii=False) + "\n")
        print(f"made {out}: vocab {n}, {len(texts)} texts, "
              f"{sum(len(t.encode()) for t in texts) / 1e6:.2f} MB")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["probe", "make"])
    ap.add_argument("src", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--vocab", type=int, default=4000)
    args = ap.parse_args()
    try:
        if args.mode == "probe":
            return probe()
    except ImportError as e:
        print(f"missing: {e}")
        return 3
    return make(args)


if __name__ == "__main__":
    sys.exit(main())
