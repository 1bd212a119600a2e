#!/usr/bin/env python3
"""A multilingual text for tokenizer benchmarks, from the translation catalogues (.mo files) that
Debian packages install under /usr/share/locale: the translated strings of each language in
turn, read in sorted file order so the same machine always gives the same text.

usage: mo_corpus.py OUT.txt [--langs vi,tr,ru,...] [--megabytes-per-lang 1] [--root /usr/share/locale]
"""
import argparse
import pathlib
import struct
import sys

DEFAULT_LANGS = "vi,tr,ru,de,fr,es,pt_BR,pl,cs,uk,ja,zh_CN,ko,ar,hi"


def translations(path):
    """The translated strings of one GNU .mo catalogue (the header entry left out)."""
    data = path.read_bytes()
    if len(data) < 28:
        return
    for order in "<>":
        magic, _revision, count, _originals, table = struct.unpack_from(order + "5I", data, 0)
        if magic == 0x950412DE:
            break
    else:
        return
    for i in range(count):
        length, offset = struct.unpack_from(order + "2I", data, table + 8 * i)
        if length == 0 or offset + length > len(data):
            continue
        text = data[offset:offset + length]
        # Plural forms are NUL-separated; each is a string of its own.
        for form in text.split(b"\0"):
            try:
                yield form.decode("utf-8")
            except UnicodeDecodeError:
                continue


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--langs", default=DEFAULT_LANGS)
    parser.add_argument("--megabytes-per-lang", type=float, default=1.0)
    parser.add_argument("--root", default="/usr/share/locale")
    args = parser.parse_args()
    budget = int(args.megabytes_per_lang * 1e6)
    root = pathlib.Path(args.root)
    parts, report = [], []
    for lang in args.langs.split(","):
        taken = 0
        for path in sorted((root / lang / "LC_MESSAGES").glob("*.mo")):
            for text in translations(path):
                if taken >= budget:
                    break
                parts.append(text)
                taken += len(text.encode("utf-8")) + 1
            if taken >= budget:
                break
        report.append(f"{lang} {taken / 1e6:.2f} MB")
    body = "\n".join(parts) + "\n"
    pathlib.Path(args.out).write_text(body, encoding="utf-8")
    size = len(body.encode("utf-8"))
    print(f"mo_corpus: {size / 1e6:.2f} MB from {root} ({', '.join(report)}) -> {args.out}", file=sys.stderr)
    if size < 1e6:
        print("mo_corpus: warning: under 1 MB of text found; install more packages with translations", file=sys.stderr)


if __name__ == "__main__":
    main()
