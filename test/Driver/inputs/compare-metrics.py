"""Compares two `moec train --metrics` files step by step.

Usage: compare-metrics.py EXPECTED.jsonl ACTUAL.jsonl TOLERANCE

Every step's loss terms, learning rate, gradient norm and expert loads must
agree to TOLERANCE relative to the expected value (absolute below 1e-3).
The count of target tokens (`predicted`) must be equal, and the count the
logits got right (`correct`) may differ by one token per 1000 predicted
(at least 1): a near-tie between two logits can fall either way under
another device's rounding. Prints one summary line; exits 1 on the first
disagreement or a missing step.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    expected, actual = load(sys.argv[1]), load(sys.argv[2])
    tolerance = float(sys.argv[3])
    if len(expected) != len(actual) or not expected:
        print(f"steps differ: {len(expected)} expected, {len(actual)} actual")
        return 1
    worst = 0.0
    worst_correct = 0
    for e, a in zip(expected, actual):
        # Models without a router have no balance loss; MH-MoE has no z-loss.
        pairs = [(k, e[k], a.get(k)) for k in
                 ("loss", "ce", "balance_loss", "z_loss", "lr", "grad_norm")
                 if k in e]
        for layer, load_e in e.get("load", {}).items():
            load_a = a.get("load", {}).get(layer, [])
            pairs += [(f"load {layer}[{i}]", x, y)
                      for i, (x, y) in enumerate(zip(load_e, load_a))]
        if "predicted" in e:
            if a.get("predicted") != e["predicted"]:
                print(f"step {e['step']}: predicted is {a.get('predicted')}, "
                      f"expected {e['predicted']}")
                return 1
            slack = max(1, e["predicted"] // 1000)
            if "correct" not in e or "correct" not in a:
                print(f"step {e['step']}: correct is missing")
                return 1
            off = abs(a["correct"] - e["correct"])
            worst_correct = max(worst_correct, off)
            if off > slack:
                print(f"step {e['step']}: correct is {a.get('correct')}, "
                      f"expected {e['correct']} (within {slack})")
                return 1
        for key, x, y in pairs:
            if y is None:
                print(f"step {e['step']}: {key} is missing")
                return 1
            diff = abs(x - y) / max(abs(x), 1e-3)
            worst = max(worst, diff)
            if diff > tolerance:
                print(f"step {e['step']}: {key} is {y}, expected {x} "
                      f"(relative difference {diff:.3g})")
                return 1
    print(f"{len(expected)} steps agree; largest relative difference "
          f"{worst:.2g}; correct tokens differ by at most {worst_correct}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
