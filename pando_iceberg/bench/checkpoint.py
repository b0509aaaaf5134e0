"""What a comparison run has finished, kept under ``<out>/checkpoint`` so that ``--resume``
continues a run that was stopped (a TPC-H SF 10 run with six layouts takes hours; two were
lost to a full disk and a restarted machine).

- ``options.json``: the run's options, written when a run starts without ``--resume``
  (which clears the folder);
- ``layout_<name>.json``: a layout's report entry, written once every table of it is laid out;
- ``queries.jsonl``: one measured held-out query a line, all layouts of it, appended as measured.

A resumed run must have the same options as the checkpoint (only ``--layouts`` may differ, and
``--out`` is the folder itself). It reuses a layout when its checkpoint entry exists and every
table still has the files recorded there (anything else is laid out again), and a query when the
checkpoint measured it on exactly the run's layouts (anything else is measured again).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..exceptions import UsageError

# options that do not change what a layout or a measurement is
_NOT_COMPARED = ("layouts", "out", "resume")


class CheckpointError(UsageError, ValueError):
    """``--resume`` cannot continue: no checkpoint, or other options (the message says which)."""


class Checkpoint:
    def __init__(self, opts: Any, resume: bool):
        self.dir = Path(opts.out) / "checkpoint"
        key = {k: v for k, v in asdict(opts).items() if k not in _NOT_COMPARED}
        key = json.loads(json.dumps(key, default=str))  # as it reads back (tuples → lists)
        options = self.dir / "options.json"
        if resume:
            if not options.is_file():
                raise CheckpointError(f"--resume: no checkpoint in {self.dir} (a run without --resume writes one)")
            saved = json.loads(options.read_text())
            differ = [f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in key.items() if saved.get(k) != v]
            if differ:
                raise CheckpointError(f"--resume: options differ from the checkpoint's in {self.dir} "
                                      f"({'; '.join(differ)}); a resumed run takes the same options "
                                      "(only --layouts may differ)")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir.mkdir(parents=True)
            options.write_text(json.dumps(key, indent=2))

    def _layout_file(self, layout: str) -> Path:
        return self.dir / f"layout_{layout}.json"

    def layout(self, layout: str) -> dict | None:
        """The layout's entry if a run finished laying it out, else None."""
        f = self._layout_file(layout)
        return json.loads(f.read_text()) if f.is_file() else None

    def save_layout(self, layout: str, info: dict) -> None:
        tmp = self._layout_file(layout).with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2, default=str))
        tmp.replace(self._layout_file(layout))  # whole or absent, even if the run dies here

    def _measured(self) -> list[dict]:
        """Every whole line of ``queries.jsonl``, in order."""
        f = self.dir / "queries.jsonl"
        out = []
        for line in f.read_text().splitlines() if f.is_file() else []:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # the last line of a run killed while writing it
                continue
        return out

    def measured_layouts(self) -> tuple[str, ...]:
        """The layouts the first measured query was measured on (none yet: ())."""
        first = next(iter(self._measured()), None)
        return tuple(first["layouts"]) if first else ()

    def queries(self, layouts: tuple[str, ...]) -> dict[tuple[int, str], dict]:
        """Measured queries by (position in the held-out list, SQL), those measured on exactly ``layouts``."""
        return {(q["index"], q["sql"]): q for q in self._measured()  # measured again: the later line wins
                if set(q.get("layouts", {})) == set(layouts)}

    def save_query(self, q: dict) -> None:
        with open(self.dir / "queries.jsonl", "a") as f:
            f.write(json.dumps(q, default=str) + "\n")
