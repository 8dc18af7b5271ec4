#!/usr/bin/env python3
"""Writes examples/data/sentences.txt: English-like sentences, one per line,
for the masked-language-model example. Deterministic (fixed seed), so the
committed file can be regenerated exactly. Agreement (a/an, singular and
plural verbs) and fixed collocations give a masked model something to learn.
"""
import random
import sys

rng = random.Random(20261125)
adjectives = ["small", "old", "quiet", "bright", "green", "heavy", "young",
              "happy", "cold", "tall", "red", "empty"]
nouns = [("cat", "cats"), ("dog", "dogs"), ("child", "children"),
         ("farmer", "farmers"), ("river", "rivers"), ("house", "houses"),
         ("tree", "trees"), ("book", "books"), ("ship", "ships"),
         ("teacher", "teachers"), ("garden", "gardens"), ("city", "cities"),
         ("apple", "apples"), ("owl", "owls"), ("engine", "engines")]
verbs = [("sees", "see"), ("likes", "like"), ("finds", "find"),
         ("carries", "carry"), ("watches", "watch"), ("follows", "follow"),
         ("builds", "build"), ("paints", "paint")]
places = ["near the river", "in the garden", "at the market",
          "under the old bridge", "behind the house", "on the hill"]
times = ["every morning", "at night", "in the winter", "after the rain",
         "before dinner", "on sunday"]


def article(word):
    return "an" if word[0] in "aeiou" else "a"


def phrase():
    plural = rng.random() < 0.35
    noun = rng.choice(nouns)[1 if plural else 0]
    adjective = rng.choice(adjectives) if rng.random() < 0.5 else None
    head = f"{adjective} {noun}" if adjective else noun
    if plural:
        det = rng.choice(["the", "some", "many", "two"])
    else:
        det = rng.choice(["the", "this", article(head)])
    return f"{det} {head}", plural


def sentence():
    subject, plural = phrase()
    verb = rng.choice(verbs)[1 if plural else 0]
    obj, _ = phrase()
    parts = [subject, verb, obj]
    if rng.random() < 0.4:
        parts.append(rng.choice(places))
    if rng.random() < 0.3:
        parts.append(rng.choice(times))
    text = " ".join(parts)
    return text[0].upper() + text[1:] + "."


out = sys.argv[1] if len(sys.argv) > 1 else "examples/data/sentences.txt"
with open(out, "w") as f:
    for _ in range(4000):
        f.write(sentence() + "\n")
