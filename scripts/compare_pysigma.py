#!/usr/bin/env python3
"""Compare Watchpost's Sigma validator with pySigma on a folder of Sigma rules.

Usage:
    compare_pysigma.py RULES_DIR WATCHPOST_BIN [--regex-engine re2|python] [--json OUT]
                       [--no-validators]

Run it with a Python that has pySigma installed (for example a venv made with
`python3 -m venv /root/.cache/pysigma-venv && /root/.cache/pysigma-venv/bin/pip install pysigma`).

Verdicts, per .yml file under RULES_DIR (recursively):

* pySigma rejects a file when `SigmaCollection.from_yaml(text, collect_errors=True)` raises
  (YAML errors included), when the collection or one of its rules carries errors
  (`collection.errors`, `rule.errors`), or when parsing a rule's condition raises (pySigma parses
  conditions lazily, so the script forces `SigmaCondition.parse()` for each condition). Regular
  expressions are compiled by the engine of the chosen policy: pySigma's default SafePolicy uses
  RE2 (`--regex-engine re2`, the default here), TrustedPolicy uses Python's `re`.
* pySigma's standard validators (the `sigma.validators` plugins found by
  `InstalledSigmaPlugins.autodiscover()`) are run on each loaded rule; their findings are style
  checks and are reported as warnings only, never as rejections.
* Watchpost's verdict comes from the JSON lines of `WATCHPOST_BIN rules validate RULES_DIR`
  (`"valid"`; its `"warnings"` are counted, not treated as rejections).

Output: a summary of counts, then every disagreement with both sides' messages, then the files both
reject. `--json OUT` writes the per-file verdicts.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path


def load_pysigma():
    import importlib.metadata

    from sigma.collection import SigmaCollection
    from sigma.exceptions import SigmaRuleLocation
    from sigma.plugins import InstalledSigmaPlugins
    from sigma.policy.profiles import SafePolicy, TrustedPolicy
    from sigma.rule import SigmaRule
    from sigma.validation import SigmaValidator

    return {
        "version": importlib.metadata.version("pysigma"),
        "SigmaCollection": SigmaCollection,
        "SigmaRuleLocation": SigmaRuleLocation,
        "InstalledSigmaPlugins": InstalledSigmaPlugins,
        "SigmaRule": SigmaRule,
        "SigmaValidator": SigmaValidator,
        "policies": {"re2": SafePolicy, "python": TrustedPolicy},
    }


UNAVAILABLE_VALIDATORS: dict[str, str] = {}
WATCHPOST_WARNINGS: dict[str, list[str]] = {}


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def pysigma_verdict(ps, path: Path, policy, validator):
    """Return (accepted, errors, warnings) for one file."""
    errors: list[str] = []
    warnings: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
        coll = ps["SigmaCollection"].from_yaml(
            text, collect_errors=True, source=ps["SigmaRuleLocation"](path), policy=policy
        )
    except Exception as e:  # YAML errors and anything raised despite collect_errors
        return False, [f"{type(e).__name__}: {one_line(e)}"], warnings

    seen = set()

    def add(err):
        msg = f"{type(err).__name__}: {one_line(err)}"
        if msg not in seen:
            seen.add(msg)
            errors.append(msg)

    for err in coll.errors:
        add(err)
    for rule in coll.rules:
        for err in getattr(rule, "errors", []):
            add(err)
        if isinstance(rule, ps["SigmaRule"]) and not rule.errors:
            try:
                for cond in rule.detection.parsed_condition:
                    cond.parse()
            except Exception as e:
                add(e)
        if validator is not None and not getattr(rule, "errors", []):
            # Run the validators one by one: a validator that cannot run here (the ATT&CK and
            # D3FEND tag validators download MITRE data on first use) is dropped and reported
            # once instead of hiding the findings of the others.
            for v in sorted(validator.validators, key=lambda v: type(v).__name__):
                name = type(v).__name__
                if name in UNAVAILABLE_VALIDATORS:
                    continue
                try:
                    issues = v.validate(rule)
                except Exception as e:
                    UNAVAILABLE_VALIDATORS[name] = f"{type(e).__name__}: {one_line(e, 160)}"
                    continue
                for issue in issues:
                    warnings.append(
                        f"{type(issue).__name__} ({issue.severity.name.lower()}): "
                        f"{one_line(issue.description, 160)}"
                    )
    if not coll.rules and not errors:
        errors.append("no rule in file")
    return not errors, errors, warnings


def watchpost_verdicts(binary: str, folder: Path):
    """Run `watchpost rules validate FOLDER` and map resolved path -> (accepted, messages)."""
    proc = subprocess.run(
        [binary, "rules", "validate", str(folder)],
        capture_output=True,
        text=True,
    )
    verdicts = {}
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        path = rec.get("path") or rec.get("file")
        if path is None:
            continue
        # {"path", "valid", and when invalid "error" (kind), "message", "line", "column"}
        accepted = bool(rec.get("valid"))
        msgs = []
        if not accepted:
            loc = f"{rec.get('line', '?')}:{rec.get('column', '?')}"
            msgs.append(f"[{rec.get('error', '?')}] {loc}: {one_line(rec.get('message', ''))}")
        # A file with several documents may give several lines: it is accepted only if all are.
        key = str(Path(path).resolve())
        prev_ok, prev_msgs = verdicts.get(key, (True, []))
        verdicts[key] = (prev_ok and accepted, prev_msgs + msgs)
        if rec.get("warnings"):
            WATCHPOST_WARNINGS.setdefault(key, []).extend(one_line(w, 200) for w in rec["warnings"])
    return verdicts, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rules_dir", type=Path)
    ap.add_argument("watchpost_bin")
    ap.add_argument("--regex-engine", choices=["re2", "python"], default="re2",
                    help="regex engine pySigma compiles |re values with (default re2, pySigma's default SafePolicy)")
    ap.add_argument("--no-validators", action="store_true", help="skip pySigma's style validators")
    ap.add_argument("--json", type=Path, help="write per-file verdicts to this file")
    args = ap.parse_args()

    ps = load_pysigma()
    policy = ps["policies"][args.regex_engine]
    validator = None
    if not args.no_validators:
        plugins = ps["InstalledSigmaPlugins"].autodiscover(include_backends=False, include_pipelines=False)
        validator = ps["SigmaValidator"](plugins.validators.values())

    files = sorted(p for p in args.rules_dir.rglob("*.yml") if p.is_file())
    wp, proc = watchpost_verdicts(args.watchpost_bin, args.rules_dir)

    rows = []
    warn_counts: collections.Counter[str] = collections.Counter()
    files_with_warnings = 0
    for path in files:
        ok, errs, warns = pysigma_verdict(ps, path, policy, validator)
        if warns:
            files_with_warnings += 1
        for w in warns:
            warn_counts[w.split(" ", 1)[0]] += 1
        key = str(path.resolve())
        wp_ok, wp_msgs = wp.get(key, (None, ["no verdict from watchpost for this file"]))
        rows.append({
            "file": str(path.relative_to(args.rules_dir)),
            "pysigma_accepted": ok,
            "pysigma_errors": errs,
            "pysigma_warnings": warns,
            "watchpost_accepted": wp_ok,
            "watchpost_errors": wp_msgs,
            "watchpost_warnings": WATCHPOST_WARNINGS.get(key, []),
        })

    n = len(rows)
    py_acc = sum(r["pysigma_accepted"] for r in rows)
    wp_acc = sum(r["watchpost_accepted"] is True for r in rows)
    both_acc = sum(r["pysigma_accepted"] and r["watchpost_accepted"] is True for r in rows)
    both_rej = sum((not r["pysigma_accepted"]) and r["watchpost_accepted"] is False for r in rows)
    missing = [r for r in rows if r["watchpost_accepted"] is None]
    only_py = [r for r in rows if r["pysigma_accepted"] and r["watchpost_accepted"] is False]
    only_wp = [r for r in rows if not r["pysigma_accepted"] and r["watchpost_accepted"] is True]

    print(f"pySigma {ps['version']} (regex engine: {args.regex_engine}); watchpost: {args.watchpost_bin} "
          f"(exit status {proc.returncode}; {one_line(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '')})")
    print(f"files                         {n}")
    print(f"accepted by pySigma           {py_acc}")
    print(f"accepted by Watchpost         {wp_acc}")
    print(f"both accept                   {both_acc}")
    print(f"both reject                   {both_rej}")
    print(f"pySigma accepts, WP rejects   {len(only_py)}")
    print(f"WP accepts, pySigma rejects   {len(only_wp)}")
    if missing:
        print(f"no Watchpost verdict          {len(missing)}")
    print(f"Watchpost warnings            {sum(len(r['watchpost_warnings']) for r in rows)} "
          f"in {sum(bool(r['watchpost_warnings']) for r in rows)} files (not rejections)")
    if validator is not None:
        print(f"pySigma validator warnings    {sum(warn_counts.values())} in {files_with_warnings} files (not rejections)")
        for name, count in warn_counts.most_common():
            print(f"    {count:6d}  {name}")
        final = collections.Counter()
        for v in validator.validators:
            if type(v).__name__ not in UNAVAILABLE_VALIDATORS:
                try:
                    for issue in v.finalize():
                        final[type(issue).__name__] += 1
                except Exception:
                    pass
        for name, count in final.most_common():
            print(f"    {count:6d}  {name} (across files)")
        for name, why in sorted(UNAVAILABLE_VALIDATORS.items()):
            print(f"    validator {name} could not run, skipped: {why}")

    def show(title, items):
        if not items:
            return
        print(f"\n== {title} ({len(items)})")
        for r in items:
            print(f"- {r['file']}")
            for e in r["pysigma_errors"] or ["(accepted)"]:
                print(f"    pySigma:   {e}")
            for e in r["watchpost_errors"] or ["(accepted)"]:
                print(f"    watchpost: {e}")

    if not only_py and not only_wp and not missing:
        print("\nno disagreement")
    show("pySigma accepts, Watchpost rejects", only_py)
    show("Watchpost accepts, pySigma rejects", only_wp)
    show("no Watchpost verdict", missing)
    both = [r for r in rows if not r["pysigma_accepted"] and r["watchpost_accepted"] is False]
    show("both reject", both)

    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
