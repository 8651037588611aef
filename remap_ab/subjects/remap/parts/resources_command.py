"""The remap's part of ``remap-ab resources`` (``parts["resources"]``): the cross-compile of
A's and B's variants (resources.py, which words the command's description and declares
what it compiles); here the command line, the output file and the exit status."""

from __future__ import annotations

import json
import os

from remap_ab import options
from remap_ab.errors import UsageError
from remap_ab.subjects.remap.parts import resources

DESCRIPTION = resources.COMMAND_DOC  # what `remap-ab resources --help` describes: the variants are the subject's


def add_arguments(p):
    options.add_implementations(p)
    for o in resources.OPTIONS:
        p.add_argument(o["flag"], dest=o["dest"], default=o["default"], help=o["help"])
    p.add_argument("--jobs", "-j", type=options.positive_int, default=None,
                   help="compile processes (default: the machine's cores)")
    spill = resources.ALLOW_SPILL
    p.add_argument(spill["flag"], dest=spill["dest"], action="append", default=[], metavar=spill["metavar"], help=spill["help"])
    p.add_argument("--json", default=None, metavar="FILE", help="also write every row and the verdict to FILE")


def _names(text: str, known, flag: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad or not names:
        raise UsageError(f"{flag} {text!r}: choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


def main(args) -> int:
    given = {o["dest"]: getattr(args, o["dest"]) for o in resources.OPTIONS}
    values = {o["dest"]: _names(given[o["dest"]], o["known"], o["flag"]) if o["type"] == "names"
              else options.int_list(given[o["dest"]], o["flag"]) for o in resources.OPTIONS}
    values[resources.ALLOW_SPILL["dest"]] = getattr(args, resources.ALLOW_SPILL["dest"])
    resources.check(values, given, args.a, args.b)
    jobs = args.jobs or os.cpu_count() or 1
    kept, bad, known = resources.compile_and_print(values, args.a, args.b, jobs)
    if args.json:
        path = options.checked_output_file(args.json, "--json")
        with open(path, "w") as f:
            json.dump(kept, f, indent=1, default=str)
        print(f"wrote {path}")
    if bad:
        print(f"FAIL: {len(bad)} regression(s) of B against A:")
        for line in bad:
            print(f"  {line}")
        return 1
    print(f"PASS: B ({args.b}) compiles every variant and spills nowhere A ({args.a}) does not"
          + (f", except the {len(known)} known spill(s) above" if known else ""))
    return 0
