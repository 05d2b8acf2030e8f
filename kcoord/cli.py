"""`kcoord` command line: `kcoord serve` runs the coordinator; `kcoord apis` lists what the codec speaks."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from . import wire
from .server import Server


def _serve(args) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = Server(args.host, args.port, max_frame_size=args.max_frame_size)
    try:
        asyncio.run(server.serve_forever())
    except OSError as e:
        print(f"kcoord serve: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


def _apis(args) -> int:
    rows = []
    for key, cls in sorted(wire.REQUEST_TYPES.items()):
        name = cls.__name__.removesuffix("Request")
        flex = cls.FIRST_FLEXIBLE_VERSION
        rows.append({"api_key": key, "name": name, "min_version": cls.MIN_VERSION,
                     "max_version": cls.MAX_VERSION, "first_flexible_version": flex if flex >= 0 else None})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'KEY':>4}  {'API':<24} {'VERSIONS':<9} FLEXIBLE FROM")
    for r in rows:
        flex = "-" if r["first_flexible_version"] is None else f"v{r['first_flexible_version']}"
        print(f"{r['api_key']:>4}  {r['name']:<24} {r['min_version']}-{r['max_version']:<7} {flex}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kcoord", description="A Kafka-compatible group coordinator.")
    sub = ap.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("serve", help="run the coordinator")
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=9092)
    sp.add_argument("--max-frame-size", type=int, default=wire.DEFAULT_MAX_FRAME_SIZE,
                    help="largest request accepted, bytes (Kafka: socket.request.max.bytes)")
    sp.add_argument("-v", "--verbose", action="store_true")
    sp.set_defaults(func=_serve)
    sa = sub.add_parser("apis", help="list the APIs and versions the codec implements")
    sa.add_argument("--json", action="store_true")
    sa.set_defaults(func=_apis)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
