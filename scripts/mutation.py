"""Mutation testing of the core modules with cosmic-ray (run through scripts/mutation.sh).

Each module is mutated against the fastest test files that cover it (MODULES below). The run
happens in a scratch copy of the working tree (.mutation/tree): cosmic-ray writes each mutant
into the source file on disk, so the tests -- including any that start `python -m acp_green`
in a subprocess -- import the mutant, and the real tree is never touched (an interrupted run
leaves nothing to restore, and tests can be edited meanwhile).
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".mutation"
TREE = STATE / "tree"

# module name -> (path to mutate, test files run against each mutant). Unit and in-process
# tests first; a file that does not exist (yet) is left out with a warning.
MODULES: dict[str, tuple[str, list[str]]] = {
    "wire": ("acp_green/wire.py", [
        "tests/wire/test_strict_json.py", "tests/wire/test_wire.py",
    ]),
    "endpoint": ("acp_green/endpoint.py", [
        "tests/endpoint/test_endpoint.py", "tests/endpoint/test_rules_unit.py", "tests/endpoint/test_input_guard.py",
        "tests/e2e/test_rules_in_process.py",
    ]),
    "sessions": ("acp_green/sessions.py", [
        "tests/sessions/test_registry.py", "tests/endpoint/test_rules_unit.py", "tests/sessions/test_session_methods.py",
    ]),
    "transport": ("acp_green/transport.py", [
        "tests/transport/test_outbound.py", "tests/transport/test_line_reader.py", "tests/e2e/test_rules_in_process.py",
        "tests/endpoint/test_input_guard.py",
    ]),
    "mcp": ("acp_green/mcp", [
        "tests/mcp/test_stdio_link.py", "tests/mcp/test_units.py", "tests/mcp/test_rules_unit.py",
    ]),
    "store": ("acp_green/store", [
        "tests/store/test_contract.py", "tests/store/test_rules.py", "tests/store/test_sqlite.py",
        "tests/store/test_text.py", "tests/store/test_report.py",
    ]),
}

# The careless one-line edits worth a test run each. Left out: arithmetic turned into exotic
# operators (**, <<, |, %, //, /: a second, rarely distinct mutant per `+`), comparisons turned
# into ones no edit produces (`==` into `<`, `<` into `is`), and the variable operators (random).
INCLUDED_OPERATORS = re.compile(
    r"core/("
    r"ReplaceBinaryOperator_\w+_(Add|Sub|Mul)"
    r"|ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Lt_GtE|GtE_Lt|Gt_LtE|LtE_Gt"
    r"|Is_IsNot|IsNot_Is|Eq_Is|Is_Eq)"
    r"|ReplaceUnaryOperator_\w+|AddNot|ReplaceTrueWithFalse|ReplaceFalseWithTrue|ReplaceAndWithOr"
    r"|ReplaceOrWithAnd|ReplaceBreakWithContinue|ReplaceContinueWithBreak|ExceptionReplacer"
    r"|NumberReplacer|RemoveDecorator|ZeroIterationForLoop"
    r")$"
)


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where a module's annotations are, if they are never evaluated (`from __future__ import
    annotations`): a mutant there (`bytes | str` into `bytes * str`) is equivalent by construction."""
    tree = ast.parse(path.read_text())
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not lazy:
        return []
    spans = []
    for node in ast.walk(tree):
        found = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in found]
    return spans


def in_annotation(mutation, spans: dict[str, list]) -> bool:
    where = str(mutation.module_path)
    if where not in spans:
        spans[where] = annotation_spans(TREE / where)
    position = tuple(mutation.start_pos)
    return any(start <= position < end for start, end in spans[where])


def copy_tree() -> None:
    """The working tree as it stands (tracked and untracked, not ignored) into TREE."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    if TREE.exists():
        shutil.rmtree(TREE)
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = TREE / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_command(files: list[str]) -> list[str]:
    # One process, stop at the first failure: a killed mutant costs one failing test.
    return [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:randomly", "-o", "addopts=", *files]


def write_config(name: str, path: str, command: list[str], timeout: float) -> Path:
    config = STATE / f"{name}.toml"
    quoted = " ".join(arg if re.fullmatch(r"[\w./:=-]+", arg) else repr(arg) for arg in command)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{path}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f'test-command = "{quoted}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return config


def key(mutation) -> tuple[str, str, int]:
    return (str(mutation.module_path), mutation.operator_name, mutation.occurrence)


def previous_results(db_path: Path) -> dict[tuple[str, str, int], WorkResult]:
    if not db_path.exists():
        return {}
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        return {key(item.mutations[0]): result for item, result in db.completed_work_items
                if result.worker_outcome != WorkerOutcome.SKIPPED}


def prepare(name: str, args: argparse.Namespace) -> tuple[Path, Path] | None:
    path, wanted = MODULES[name]
    files = [f for f in wanted if (TREE / f).exists()]
    for missing in sorted(set(wanted) - set(files)):
        print(f"[{name}] note: {missing} does not exist; left out")
    command = test_command(files)
    print(f"[{name}] baseline: {' '.join(files)}", flush=True)
    started = time.monotonic()
    baseline = subprocess.run(command, cwd=TREE, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if baseline.returncode != 0:
        print(f"[{name}] the tests fail without any mutant; fix them first:\n{baseline.stdout[-3000:]}")
        return None
    # Generous: the machine may be shared, and a survivor slowed past the timeout would count as killed.
    timeout = max(90.0, 5 * elapsed)
    print(f"[{name}] baseline green in {elapsed:.1f}s; mutant timeout {timeout:.0f}s", flush=True)
    config = write_config(name, path, command, timeout)
    db_path = STATE / f"{name}.sqlite"
    earlier = previous_results(db_path) if args.survivors else {}
    if db_path.exists():
        db_path.unlink()
    subprocess.run([str(Path(sys.executable).parent / "cosmic-ray"), "init", str(config), str(db_path)],
                   cwd=TREE, check=True)
    rng = random.Random(args.seed)
    with use_db(str(db_path)) as db:
        pending = list(db.pending_work_items)
        spans: dict[str, list] = {}
        wanted_items = [item for item in pending if INCLUDED_OPERATORS.match(item.mutations[0].operator_name)
                        and not in_annotation(item.mutations[0], spans)]
        if earlier:  # the same mutants as last time
            wanted_items = [item for item in wanted_items if key(item.mutations[0]) in earlier]
        elif args.quick is not None and len(wanted_items) > args.quick:
            sample = {item.job_id for item in rng.sample(wanted_items, args.quick)}
            wanted_items = [item for item in wanted_items if item.job_id in sample]
        chosen = {item.job_id for item in wanted_items}
        skipped = [item.job_id for item in pending if item.job_id not in chosen]
        db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not selected"))
        if earlier:
            for item in wanted_items:
                result = earlier.get(key(item.mutations[0]))
                if result is not None and result.is_killed:
                    db.set_result(item.job_id, result)
        runs = len(list(db.pending_work_items))
    print(f"[{name}] {len(wanted_items)} mutants selected, {runs} to run", flush=True)
    return config, db_path


def run(name: str, config: Path, db_path: Path) -> None:
    started = time.monotonic()
    subprocess.run([str(Path(sys.executable).parent / "cosmic-ray"), "exec", str(config), str(db_path)],
                   cwd=TREE, check=True)
    print(f"[{name}] done in {time.monotonic() - started:.0f}s", flush=True)


def mutated_line(diff: str | None) -> str:
    added = [line[1:].strip() for line in (diff or "").splitlines() if line.startswith("+") and not line.startswith("+++")]
    return added[0] if added else "?"


_FAILED_TEST = re.compile(r"^(?:FAILED (\S+?)(?: - .*)?|_{3,} (\S+) _{3,})$", re.M)


def killer(output: str | None) -> str | None:
    """The test that failed first under a mutant (the run stops at the first failure)."""
    found = _FAILED_TEST.search(output or "")
    return (found.group(1) or found.group(2)) if found else None


def report(names: list[str], show_killers: bool = False) -> int:
    total_killed = total = 0
    survivors: list[str] = []
    killers: list[str] = []
    rows = []
    for name in names:
        db_path = STATE / f"{name}.sqlite"
        if not db_path.exists():
            continue
        killed = count = pending = timeouts = 0
        with use_db(str(db_path), WorkDB.Mode.open) as db:
            pending = len(list(db.pending_work_items))
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    continue
                count += 1
                if result.is_killed:
                    killed += 1
                    timeouts += result.output == "timeout"
                    by = killer(result.output)
                    if show_killers and by:
                        m = item.mutations[0]
                        killers.append(f"  {by}: {m.module_path}:{m.start_pos[0]} {m.operator_name}: {mutated_line(result.diff)}")
                else:
                    m = item.mutations[0]
                    survivors.append(f"  {m.module_path}:{m.start_pos[0]} {m.operator_name} #{m.occurrence}"
                                     f" in {m.definition_name or '-'}: {mutated_line(result.diff)}")
        rows.append((name, killed, count, pending, timeouts))
        total_killed += killed
        total += count
    print("\nmodule      killed/total   score")
    for name, killed, count, pending, timeouts in rows:
        note = f"  ({timeouts} of them by timeout)" if timeouts else ""
        note += f"  ({pending} not run)" if pending else ""
        print(f"{name:<11} {killed:>5}/{count:<6} {100 * killed / count if count else 0:6.1f}%{note}")
    print(f"{'total':<11} {total_killed:>5}/{total:<6} {100 * total_killed / total if total else 0:6.1f}%")
    print(f"\nsurvivors ({len(survivors)}):")
    print("\n".join(survivors) if survivors else "  none")
    if show_killers:
        print(f"\nkilled, by the first test that failed:")
        print("\n".join(sorted(killers)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Mutation testing (cosmic-ray) of the core modules against their fastest tests.")
    parser.add_argument("--module", action="append", choices=sorted(MODULES),
                        help="run only this module (repeatable); default: all of " + ", ".join(MODULES))
    parser.add_argument("--quick", nargs="?", type=int, const=40, default=None, metavar="N",
                        help="test a random sample of N mutants per module (default N: 40); default: all of them")
    parser.add_argument("--seed", type=int, default=1, help="seed of the --quick sample (default: 1)")
    parser.add_argument("--survivors", action="store_true",
                        help="re-test only the mutants the last run of a module left alive, keeping its other results")
    parser.add_argument("--report", action="store_true", help="print the last run's scores and survivors; run nothing")
    parser.add_argument("--killers", action="store_true", help="also list each killed mutant with the test that killed it")
    args = parser.parse_args()
    names = args.module or list(MODULES)
    STATE.mkdir(exist_ok=True)
    if not args.report:
        copy_tree()
        for name in names:
            prepared = prepare(name, args)
            if prepared is not None:
                run(name, *prepared)
    return report(names, args.killers)


if __name__ == "__main__":
    sys.exit(main())
