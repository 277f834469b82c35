"""Print what reading a runx package costs beside the same package written for proctor.

A ``minimum_runx`` profile is read with its runner profiles mapped onto methods and the inputs
its steps read declared for it (:mod:`proctor.parser.runx`); the yardstick is the same profile
with ``minimum_proctor``, its runner as ``default_method`` and its inputs declared, read in the
same run. Schemas are checked once per text and cached, so the loop measures the YAML read,
the strict model and the profile checks.

Run: .venv/bin/python bench/runx_profile.py
"""

from __future__ import annotations

from _timing import measure
from proctor.parser.skill import parse_run_yaml

STEP = """      - id: s{n}
        result_as: out{n}
        effects: ask
        tool: {{command: python3, args: [run.py, $input.topic, $input.note{n}]}}
"""
RUNX = """minimum_runx: 0.12.0
credentials:
  c: {{provider: p, auth: {{k: {{delivery: {{env: K}}}}}}}}
runners:
  main: {{type: graph, default: true, credential: c}}
methods:
  main:
    steps:
{steps}"""
PROCTOR = """minimum_proctor: 0.1.0
default_method: main
credentials:
  c: {{provider: p, auth: {{k: {{delivery: {{env: K}}}}}}}}
methods:
  main:
    inputs:
      type: object
      properties: {{{props}}}
      required: [{names}]
      additionalProperties: false
    steps:
{steps}"""


def main() -> None:
    for count in (3, 30):
        steps = "".join(STEP.format(n=n) for n in range(count))
        names = ["topic", *(f"note{n}" for n in range(count))]
        runx = RUNX.format(steps=steps)
        mine = PROCTOR.format(
            steps=steps.replace("        effects: ask\n", "        effects: ask\n"
                                "        credential: c\n"),
            props=", ".join(f"{n}: {{}}" for n in names),
            names=", ".join(names),
        )  # fmt: skip
        parse_run_yaml(runx, "bench/run.yaml")
        rounds = 2000 if count == 3 else 200
        peer = measure(
            f"proctor profile, {count} steps", lambda t=mine: parse_run_yaml(t, "b"), rounds
        )
        got = measure(f"runx profile, {count} steps", lambda t=runx: parse_run_yaml(t, "b"), rounds)
        print(f"{'':<52} ratio {got / peer:.2f}x")


if __name__ == "__main__":
    main()
