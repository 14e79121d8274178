"""What one message costs on the wire: the grader's format against torch.save, side by side.

Every value that crosses the sandbox boundary while the eight hidden suites grade one
full submission (the references playing the student, ``tests/grading/inprocess.py``,
which sends each call's arguments and result through the wire format) is recorded
once, then each configuration encodes and decodes all of them, in turns:

* ``protocol``: ``autograder.sandbox.protocol``'s ``encode`` and ``decode``, with the
  vocabulary walks on both sides (what a call costs the grader and the worker);
* ``torch.save``: ``torch.save`` into memory and ``torch.load(weights_only=True)``,
  without any of the protocol's checks: the floor of the format the protocol used
  before.

    .venv/bin/python benchmarks/wire_format.py [--rounds 5]

prints the messages recorded, the median CPU seconds of each configuration over the
rounds and their ratio, and writes ``benchmarks/results/wire_format.json``.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "wire_format.json"


def recorded_messages() -> list:
    """Every value the hidden suites send through the wire format for one full submission."""
    sys.path.insert(0, str(REPO))
    import autograder.preload  # noqa: F401  (what the fork server imports)
    import tests.grading.inprocess as inprocess
    from autograder.course import load_course
    from autograder.sandbox import protocol

    messages = []
    honest = inprocess._round_trip

    def recording(value):
        messages.append(protocol.to_wire(value))
        return honest(value)

    inprocess._round_trip = recording
    with inprocess.grading_environment():
        for notebook in load_course().notebooks:
            if notebook.auto_points:
                inprocess.grade_in_process(notebook.stem, inprocess.student_namespace(notebook.stem))
    inprocess._round_trip = honest
    return messages


def both_ways_protocol(messages: list) -> None:
    from autograder.sandbox import protocol

    for value in messages:
        protocol.decode(protocol.encode(value))


def both_ways_torch_save(messages: list) -> None:
    import torch

    for value in messages:
        buffer = io.BytesIO()
        torch.save(value, buffer)
        torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    messages = recorded_messages()
    configurations = {"protocol": both_ways_protocol, "torch.save": both_ways_torch_save}
    seconds: dict[str, list[float]] = {name: [] for name in configurations}
    for _ in range(args.rounds):
        for name, run in configurations.items():
            start = time.process_time()
            run(messages)
            seconds[name].append(time.process_time() - start)
    medians = {name: statistics.median(times) for name, times in seconds.items()}
    ratio = medians["protocol"] / medians["torch.save"]
    print(f"{len(messages)} messages of one full submission's hidden suites, each encoded and decoded; "
          f"median CPU s over {args.rounds} rounds:")
    for name, median in medians.items():
        print(f"  {name:12} {median:.3f}")
    print(f"  protocol / torch.save: {ratio:.2f}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({
        "messages": len(messages), "rounds": args.rounds, "cpu_s": seconds,
        "median_cpu_s": {name: round(m, 4) for name, m in medians.items()},
        "protocol_over_torch_save": round(ratio, 3),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__},
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
