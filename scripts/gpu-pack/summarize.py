#!/usr/bin/env python3
"""Reads what run.sh left in OUTDIR and writes results.json and results.md.

Usage: summarize.py OUTDIR [--steps N] [--device cuda|emu] [--quiet]
                     [--layers-status STATUS] [--unavailable STATUS]

Loss curves of the device under test and the cpu (same bundle, seed and
data) must agree within the tolerances below; any unit-test failure,
kernel-check failure, failed run or curve mismatch makes the exit status 1.
results.json also carries the layer benchmarks' figures (layers.tsv) and
the inference checks' times ("inference": moec eval per batch, moec run per
token), read from the time lines moec printed.
Work that run.sh's time budget skipped (status "skipped") or stopped
(status 124, timeout's) fails nothing but leaves the suite incomplete:
exit status 7 when nothing failed. OUTDIR/layers.md, when there, ends
results.md; layers.sh's exit status (0, 1 failed, 7 cut short) counts
like the checks'.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys

# Relative tolerances on the training loss, cuda against cpu: the first
# steps (before rounding differences compound), every step, and the mean of
# the last 20 steps. bf16 rounds activations, so it is looser.
TOLERANCES = {
    "f32": {"first20": 1e-3, "every": 5e-2, "last20": 1e-2},
    "bf16": {"first20": 2e-2, "every": 1e-1, "last20": 3e-2},
    "f64": {"first20": 1e-6, "every": 1e-3, "last20": 1e-4},
}


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def read_metrics(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line))
    return rows


# timeout's exit status: run.sh stopped the command at the budget's end.
STOPPED = 124
INCOMPLETE = 7


def check_state(rc):
    """passed, failed, skipped (never started) or stopped (at the budget's end)."""
    if rc == "skipped":
        return "skipped"
    if int(rc) == STOPPED:
        return "stopped"
    return "passed" if int(rc) == 0 else "failed"


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-3)


def last20_accuracy(rows):
    """The share of target tokens the logits got right over `rows`, in
    percent; None for metrics without the counts."""
    if not rows or any("correct" not in r or "predicted" not in r for r in rows):
        return None
    total = sum(r["predicted"] for r in rows)
    return 100.0 * sum(r["correct"] for r in rows) / total if total else None


def compare(cuda, cpu, dtype):
    tol = TOLERANCES.get(dtype, TOLERANCES["f32"])
    n = min(len(cuda), len(cpu))
    if n == 0:
        return {"passed": False, "why": "no steps to compare"}
    diffs = []
    for a, b in zip(cuda[:n], cpu[:n]):
        la, lb = a.get("loss"), b.get("loss")
        if la is None or lb is None or not math.isfinite(la):
            return {"passed": False, "why": f"non-finite loss at step {a.get('step')}"}
        diffs.append(relative(la, lb))
    first = max(diffs[:20])
    every = max(diffs)
    tail = min(20, n)
    mean_cuda = statistics.fmean(r["loss"] for r in cuda[n - tail:n])
    mean_cpu = statistics.fmean(r["loss"] for r in cpu[n - tail:n])
    last = relative(mean_cuda, mean_cpu)
    worst = diffs.index(every) + 1
    accuracy = {"cuda": last20_accuracy(cuda[n - tail:n]),
                "cpu": last20_accuracy(cpu[n - tail:n])}
    failures = []
    if first > tol["first20"]:
        failures.append(f"first 20 steps differ by {first:.2e} > {tol['first20']:.0e}")
    if every > tol["every"]:
        failures.append(f"step {worst} differs by {every:.2e} > {tol['every']:.0e}")
    if last > tol["last20"]:
        failures.append(f"last-20 mean differs by {last:.2e} > {tol['last20']:.0e}")
    if len(cuda) != len(cpu):
        failures.append(f"{len(cuda)} cuda steps against {len(cpu)} cpu steps")
    return {
        "passed": not failures,
        "why": "; ".join(failures),
        "steps": n,
        "first20_max_rel": first,
        "max_rel": every,
        "max_rel_step": worst,
        "last20_mean_rel": last,
        "first_loss": {"cuda": cuda[0]["loss"], "cpu": cpu[0]["loss"]},
        "last20_mean_loss": {"cuda": mean_cuda, "cpu": mean_cpu},
        # Shown beside the losses, not checked: a near-tie of two logits
        # falls either way under another device's rounding.
        "last20_accuracy": accuracy,
        "tolerance": tol,
    }


# layers.sh's layers.tsv, column by column.
LAYER_COLUMNS = ("name", "forward_flops", "backward_flops",
                 "moec_forward_ms", "moec_backward_ms",
                 "torch_forward_ms", "torch_forward_backward_ms",
                 "compiled_forward_ms", "compiled_forward_backward_ms",
                 "cublas_same_flops_ms", "exit",
                 "moec_own_gemms_forward_ms", "moec_own_gemms_backward_ms")


def number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def tflops(flops, ms):
    return flops / (ms * 1e9) if flops and ms else None


def read_layers(out):
    """layers.tsv as records, with the achieved TFLOP/s and ratios that
    layers.md shows; the manifest's description of each layer beside it.
    A row it cannot read is a failed layer, not a crash."""
    manifest = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "layers", "manifest.tsv")
    described = {row[0]: row[1] for row in read_tsv(manifest) if len(row) > 1}
    layers = []
    for row in read_tsv(os.path.join(out, "layers.tsv")):
        if len(row) != len(LAYER_COLUMNS):
            layers.append({"name": row[0], "state": "failed",
                           "why": f"layers.tsv row of {len(row)} columns, "
                                  f"not {len(LAYER_COLUMNS)}"})
            continue
        layer = dict(zip(LAYER_COLUMNS, row))
        exit_text = layer.pop("exit")
        for key in LAYER_COLUMNS[1:]:
            if key in layer:
                layer[key] = number(layer[key])
                if key.endswith("_flops") and layer[key] is not None:
                    layer[key] = int(layer[key])
        layer["what"] = described.get(layer["name"], "")
        try:
            layer["state"] = check_state(exit_text)
        except ValueError:
            layer["state"] = "failed"
            layer["why"] = f"exit status '{exit_text}' in layers.tsv"
        if layer["state"] in ("skipped", "stopped"):
            # Nothing was timed: the zeros layers.sh wrote are no times.
            for key in LAYER_COLUMNS:
                if key.endswith("_ms"):
                    layer[key] = None

        def both(first, second):
            a, b = layer[first], layer[second]
            return a + b if a is not None and b is not None else None

        moec_both = both("moec_forward_ms", "moec_backward_ms")
        flops_both = both("forward_flops", "backward_flops")
        layer["moec_forward_tflops"] = tflops(layer["forward_flops"],
                                              layer["moec_forward_ms"])
        layer["moec_forward_backward_tflops"] = tflops(flops_both, moec_both)
        layer["cublas_tflops"] = tflops(layer["forward_flops"],
                                        layer["cublas_same_flops_ms"])
        eager = layer["torch_forward_backward_ms"]
        layer["moec_vs_eager_forward_backward"] = (
            eager / moec_both if eager and moec_both else None)
        layers.append(layer)
    return layers


# The time lines of moec eval (with its accuracy line, when it printed
# one) and moec run (README), whole, and what each figure is called in
# results.json; inf and nan read as no figure.
NUM = r"[0-9.]+|inf|nan"
TIME_LINES = (
    (rf"(?P<ms_per_batch>{NUM}) ms per batch of (?P<batch>[0-9]+) x "
     rf"(?P<seq_len>[0-9]+) \((?P<tokens_per_s>{NUM}) tokens/s; "
     r"(?P<timed>median of (?P<batches>[0-9]+) batch(es)? after the first|"
     r"one batch, with its warm-up)\)"
     rf"(; (?P<accuracy>[a-z -]*accuracy) (?P<accuracy_percent>{NUM})% "
     r"\((?P<correct>[0-9]+) of (?P<predicted>[0-9]+) [a-z ]+\))?"),
    (rf"prompt (?P<prompt_tokens>[0-9]+) tokens in (?P<prompt_ms>{NUM}) ms"
     rf"(; (?P<later_tokens>[0-9]+) tokens after it at (?P<ms_per_token>{NUM})"
     rf" ms each \(median; (?P<decode_tokens_per_s>{NUM}) tokens/s\))?"),
    (rf"(?P<translate_ms>{NUM}) ms for (?P<source_tokens>[0-9]+) source and "
     r"(?P<output_tokens>[0-9]+) output tokens"),
)
COUNTS = ("batch", "seq_len", "batches", "prompt_tokens", "later_tokens",
          "source_tokens", "output_tokens", "correct", "predicted")
TEXTS = ("timed", "accuracy")


def read_inference(checks):
    """The eval and generate checks' figures by model: what their time
    lines say, as numbers (none for a check that failed or did not run)."""
    models = {}
    for c in checks:
        if c["kind"] not in ("eval", "generate"):
            continue
        entry = models.setdefault(c["name"], {"name": c["name"]})
        entry[c["kind"]] = c["state"]
        if c["state"] != "passed":
            continue
        for pattern in TIME_LINES:
            m = re.fullmatch(pattern, c["detail"])
            if m:
                entry.update({k: v if k in TEXTS else
                              int(v) if k in COUNTS else number(v)
                              for k, v in m.groupdict().items()
                              if v is not None})
                break
        else:
            entry.setdefault("unread", []).append(c["detail"])
    return list(models.values())


def timing(rows, tokens_per_step):
    steady = [r["time_s"] for r in rows[1:]] or [r["time_s"] for r in rows]
    if not steady:
        return {}
    ms = statistics.median(steady) * 1e3
    host = [r.get("host_s", 0.0) for r in rows[1:]] or [0.0]
    return {
        "ms_per_step": ms,
        "tokens_per_s": tokens_per_step / (ms / 1e3) if ms > 0 else None,
        "host_ms_per_step": statistics.median(host) * 1e3,
        "first_step_s": rows[0]["time_s"],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--unavailable", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--layers-status", type=int, default=0)
    args = parser.parse_args()
    out = args.outdir
    logs = os.path.join(out, "logs")

    def text(name):
        path = os.path.join(logs, name)
        return open(path).read().strip() if os.path.exists(path) else ""

    result = {
        "moec": text("version.txt"),
        "machine": text("info.txt").splitlines(),
        "nvidia_smi": text("nvidia-smi.txt"),
        "steps": args.steps,
        "device": args.device,
    }
    if args.unavailable:
        result["unavailable"] = {"status": args.unavailable, "why": text("info.err")}
        result["passed"] = False
        write(out, result, args.quiet)
        return args.unavailable

    checks = []
    for kind, name, rc, detail in read_tsv(os.path.join(out, "checks.tsv")):
        state = check_state(rc)
        checks.append({"kind": kind, "name": name, "state": state,
                       "passed": state == "passed",
                       "exit": None if rc == "skipped" else int(rc),
                       "detail": detail})
    runs = []
    for row in read_tsv(os.path.join(out, "runs.tsv")):
        name, cold, rc_cold, warm, rc_warm, gpu, rc_gpu, cpu, rc_cpu = row
        example, arch, dtype = name.rsplit(".", 2)
        with open(os.path.join(out, "bundles", name + ".bundle.json")) as f:
            training = json.load(f)["training"]
        tokens = training["batch"] * training["seq_len"]
        cuda = read_metrics(os.path.join(logs, name + ".cuda.jsonl"))
        cpu_rows = read_metrics(os.path.join(logs, name + ".cpu.jsonl"))
        exits = {"cold": int(rc_cold), "warm": int(rc_warm),
                 "cuda": int(rc_gpu), "cpu": int(rc_cpu)}
        # A refused graph capture or another warning: the run passes, but
        # its times may not be what they seem.
        warnings = [line.strip() for line in
                    text("train-" + name + "-cuda.txt").splitlines()
                    if line.startswith("moec: warning:")]
        run = {
            "name": name, "example": example, "arch": arch, "dtype": dtype,
            "warnings": warnings,
            "tokens_per_step": tokens,
            "cold_start_s": float(cold), "warm_start_s": float(warm),
            "cuda": timing(cuda, tokens), "cpu": timing(cpu_rows, tokens),
            "exits": exits,
        }
        failed = {k: v for k, v in exits.items() if v not in (0, STOPPED)}
        if failed:
            run["comparison"] = {"passed": False,
                                 "why": f"a run failed: exit statuses {exits}"}
        elif any(exits.values()):
            ran = {"cold": float(cold), "warm": float(warm),
                   args.device: float(gpu), "cpu": float(cpu)}
            run["comparison"] = {"passed": False, "stopped": True,
                                 "why": "stopped at the time budget's end: "
                                        f"exit statuses {exits}, seconds {ran}"}
        else:
            run["comparison"] = compare(cuda, cpu_rows, dtype)
        runs.append(run)
    result["checks"] = checks
    result["runs"] = runs
    result["layers"] = read_layers(out)
    result["inference"] = read_inference(checks)
    layers = args.layers_status
    result["layers_status"] = layers
    failed = (any(c["state"] == "failed" for c in checks) or
              any(l["state"] == "failed" for l in result["layers"]) or
              any(not r["comparison"]["passed"] and
                  not r["comparison"].get("stopped") for r in runs) or
              layers not in (0, INCOMPLETE))
    incomplete = (any(c["state"] in ("skipped", "stopped") for c in checks) or
                  any(r["comparison"].get("stopped") for r in runs) or
                  layers == INCOMPLETE)
    result["passed"] = not failed and not incomplete and bool(runs)
    result["incomplete"] = incomplete and not failed
    write(out, result, args.quiet)
    if result["passed"]:
        return 0
    return INCOMPLETE if result["incomplete"] else 1


def write(out, result, quiet=False):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    title = "# moec GPU suite"
    if result.get("device") == "emu":
        title += " on the emu device (no GPU: it checks the suite itself)"
    lines = [title, ""]
    lines += ["```"] + [result["moec"]] + result["machine"] + ["```", ""]
    if "unavailable" in result:
        lines += [f"Not run: {result['unavailable']['why']} "
                  f"(exit {result['unavailable']['status']})", ""]
    if result.get("checks"):
        lines += ["| check | name | result | detail |", "|---|---|---|---|"]
        verdicts = {"passed": "pass", "skipped": "skipped (time budget)",
                    "stopped": "stopped (time budget)"}
        for c in result["checks"]:
            verdict = verdicts.get(c["state"], f"FAIL (exit {c['exit']})")
            lines.append(f"| {c['kind']} | {c['name']} | {verdict} | {c['detail']} |")
        lines.append("")
    if result.get("runs"):
        device = result.get("device", "cuda")
        lines += [f"Training, {result['steps']} steps, seed 1, {device} against cpu "
                  "(ms/step and host ms/step are medians over steps 2..N; cold "
                  "start: process start to the first step done with an empty "
                  "kernel cache; warm: the same with the cache filled).", "",
                  f"| model | cold start s | warm start s | {device} ms/step | {device} tok/s "
                  f"| host ms/step | cpu ms/step | loss first ({device}/cpu) | "
                  f"loss last 20 ({device}/cpu) | accuracy % last 20 ({device}/cpu) "
                  "| max rel. diff | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in result["runs"]:
            c, g, p = r["comparison"], r["cuda"], r["cpu"]
            def f(v, spec):
                return format(v, spec) if isinstance(v, (int, float)) else "-"
            first = c.get("first_loss", {})
            last = c.get("last20_mean_loss", {})
            hits = c.get("last20_accuracy", {})
            lines.append(
                f"| {r['name']} | {r['cold_start_s']:.2f} | {r['warm_start_s']:.2f} "
                f"| {f(g.get('ms_per_step'), '.2f')} | {f(g.get('tokens_per_s'), '.0f')} "
                f"| {f(g.get('host_ms_per_step'), '.3f')} | {f(p.get('ms_per_step'), '.1f')} "
                f"| {f(first.get('cuda'), '.4f')}/{f(first.get('cpu'), '.4f')} "
                f"| {f(last.get('cuda'), '.4f')}/{f(last.get('cpu'), '.4f')} "
                f"| {f(hits.get('cuda'), '.2f')}/{f(hits.get('cpu'), '.2f')} "
                f"| {f(c.get('max_rel'), '.1e')} "
                f"| {verdict_of(c)} |")
        warned = [(r["name"], w) for r in result["runs"] for w in r.get("warnings", [])]
        if warned:
            lines += ["", f"Warnings of the {device} training runs (the times above "
                      "may not be what they seem):", ""]
            lines += [f"- {name}: {w}" for name, w in warned]
        lines += ["", "Tolerances (relative, on the loss): " + "; ".join(
            f"{d}: first 20 steps {t['first20']:.0e}, every step {t['every']:.0e}, "
            f"mean of the last 20 {t['last20']:.0e}" for d, t in TOLERANCES.items()), ""]
    layers = os.path.join(out, "layers.md")
    if os.path.exists(layers):
        with open(layers) as f:
            lines += [f.read().rstrip("\n"), ""]
    if result["passed"]:
        verdict = "PASS"
    elif result.get("incomplete"):
        verdict = ("INCOMPLETE: the time budget ran out; nothing that finished "
                   "failed")
    elif result.get("layers_status", 0) not in (0, INCOMPLETE):
        verdict = (f"FAIL (the layer benchmarks exited "
                   f"{result['layers_status']}; see layers.md and the logs)")
    else:
        verdict = "FAIL"
    lines.append("Result: " + verdict)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))


def verdict_of(comparison):
    if comparison["passed"]:
        return "pass"
    if comparison.get("stopped"):
        return comparison.get("why", "stopped")
    return "FAIL: " + comparison.get("why", "")


if __name__ == "__main__":
    sys.exit(main())
