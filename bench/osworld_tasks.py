"""OSWorld's own tasks set up on desktops of one server: how many of each domain's task configs complete their
setup steps (issue target: >= 90 % of the Debian domains' tasks; docs/osworld.md "Figures").

Each task's `config` runs through the real harness's SetupController (desktop_env 1.0.2, in the interpreter
tests/support/desktop_env_python.py builds, or --desktop-env-python) against a desktop's guest API, the desktop
reset before each task as the provider's `revert="reset"` does, `--parallel` desktops at once
(bench/osworld_setup_worker.py). A task's setup is ok when no step raised and the guest answered no error (400 or
more; upstream's controller would log some of those and carry on); a second column also wants every setup command
to have exited 0 (upstream's controller ignores exit statuses: a task's command may fail on the image too) and no
app the setup launched to be gone with a non-zero status.

Tasks whose setup needs the internet are not run: this machine reaches package registries only. That is a task
whose setup names a URL outside the machine (the `download` of its files from Hugging Face or Google Drive, a
Chrome tab, a `wget` in a command) or signs in (`googledrive`, `login`), or `update_browse_history` (the
controller downloads its history database). They are counted apart, and the percentage is over the rest.

The task configs are OSWorld's `evaluation_examples`; the repository does not download them: give a copy.

Usage: .venv/bin/python bench/osworld_tasks.py --examples OSWorld/evaluation_examples [--parallel 4]
       [--domains os,chrome] [--out results.json]
The apps: `sandbox-desktop install osworld` (docs/osworld.md "Installing the apps").
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import launch_server
from tests.support.desktop_env_python import desktop_env_python

DOMAINS = ("chrome", "libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "vlc", "thunderbird",
           "os", "multi_apps")
"""The domains whose apps Debian has (docs/osworld.md "Installing the apps"); vs_code's has none."""
SIGN_IN = {"googledrive": "signs in to Google Drive", "login": "signs in to a web site",
           "update_browse_history": "downloads Chrome's history database (huggingface.co)"}
URL = re.compile(r"https?://([^/\s:'\"?]+)")
LOCAL = {"localhost", "127.0.0.1", "0.0.0.0", "::1"}
SIZE = (1920, 1080)  # the harness's default screen: tasks' commands are written for it
TASK_BUDGET_S = 300


def internet_need(config: list[dict[str, Any]]) -> str | None:
    """Why a task's setup needs the internet, or None."""
    for step in config:
        if step["type"] in SIGN_IN:
            return f"{step['type']}: {SIGN_IN[step['type']]}"
        hosts = sorted({host for host in URL.findall(json.dumps(step.get("parameters", {}))) if host not in LOCAL})
        if hosts:
            return f"{step['type']} from {hosts[0]}"
    return None


def load(examples: Path, domains: list[str]) -> list[dict[str, Any]]:
    folder = examples / "examples" if (examples / "examples").is_dir() else examples
    tasks = []
    for domain in domains:
        for path in sorted((folder / domain).glob("*.json")):
            task = json.loads(path.read_text())
            tasks.append({"id": task["id"], "domain": domain, "config": task.get("config", []),
                          "internet": internet_need(task.get("config", []))})
    if not tasks:
        raise SystemExit(f"no task configs under {folder}/<domain>/*.json")
    return tasks


def desktops(api: Any, count: int) -> list[dict[str, Any]]:
    made = []
    for _ in range(count):
        answer = api.post("/v1/desktops", json={"width": SIZE[0], "height": SIZE[1], "osworld": True})
        if answer.status_code != 201:
            raise SystemExit(f"create failed: {answer.status_code} {answer.text}")
        body, guest = answer.json(), answer.json()["osworld"]
        made.append({"id": body["id"], "ip": "127.0.0.1", "port": guest["port"], "cdp": guest["cdpPort"],
                     "vlc": guest["vlcPort"], "width": SIZE[0], "height": SIZE[1]})
    return made


def run(python: Path, server: Any, runnable: list[dict[str, Any]], parallel: int, cache: Path) -> list[dict[str, Any]]:
    with server.client(timeout=120) as api:
        made = desktops(api, parallel)
        cache.mkdir(parents=True, exist_ok=True)
        job = {"server": server.url, "token": server.token, "cache": str(cache), "desktops": made,
               "tasks": runnable, "timeout": TASK_BUDGET_S * len(runnable)}
        try:
            worker = subprocess.run([str(python), str(Path(__file__).with_name("osworld_setup_worker.py"))],
                                    input=json.dumps(job), capture_output=True, text=True,
                                    timeout=TASK_BUDGET_S * len(runnable) + 60)
        finally:
            for desktop in made:
                api.delete(f"/v1/desktops/{desktop['id']}")
    results = [json.loads(line) for line in worker.stdout.splitlines() if line.startswith("{")]
    if worker.returncode != 0 or len(results) != len(runnable):
        print(f"worker exited {worker.returncode} with {len(results)} of {len(runnable)} results:\n"
              f"{worker.stderr[-3000:]}")
    return results


def reason(step: str, error: str) -> str:
    """A failure's reason without what differs per task (paths, numbers), to group by."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\u2018[^\u2019]*\u2019", "'…'", error)  # GNU's quotes too
    return f"{step}: {re.sub(r'[0-9]+', 'N', text)[:160]}"


def table(tasks: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'domain':<22}{'tasks':>6}{'needs internet':>16}{'run':>6}{'setup ok':>10}{'%':>7}"
          f"{'and exit 0':>12}{'%':>7}")
    totals: Counter[str] = Counter()
    for domain in [*sorted({t["domain"] for t in tasks}), "all"]:
        mine = [t for t in tasks if domain in ("all", t["domain"])]
        ran = [by_id[t["id"]] for t in mine if not t["internet"] and t["id"] in by_id]
        ok = [r for r in ran if r["ok"]]
        clean = [r for r in ok if not r["exits"]]
        share = [f"{100 * len(part) / len(ran):.1f}" if ran else "-" for part in (ok, clean)]
        online = sum(1 for t in mine if t["internet"])
        print(f"{domain:<22}{len(mine):>6}{online:>16}{len(ran):>6}{len(ok):>10}{share[0]:>7}{len(clean):>12}"
              f"{share[1]:>7}")
        totals.update(online=online)


def grouped(title: str, found: list[tuple[str, dict[str, Any], str]]) -> None:
    """`found`: (reason, result, detail) triples, printed by reason, the most frequent first."""
    groups = defaultdict(list)
    for why, result, detail in found:
        groups[why].append((result, detail))
    print(f"\n{title} ({len(found)}):")
    for why, group in sorted(groups.items(), key=lambda item: -len(item[1])):
        print(f"  {len(group):>4}  {why}")
        for result, detail in group:
            print(f"          {result['domain']}/{result['id']}: {detail[:200]}")


def report(tasks: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    table(tasks, {r["id"]: r for r in results})
    online = [t for t in tasks if t["internet"]]
    print(f"\nNot run: {len(online)} tasks whose setup needs the internet (this machine reaches package registries "
          "only), by their first such step:")
    hosts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for task in online:
        step, _, host = task["internet"].partition(" from ")
        hosts[step][host] += 1
    for step, counted in sorted(hosts.items(), key=lambda item: -item[1].total()):
        named = ", ".join(f"{host or '-'} {count}" for host, count in counted.most_common(4))
        more = f", {len(counted) - 4} more hosts" if len(counted) > 4 else ""
        print(f"  {counted.total():>4}  {step} ({named}{more})")
    grouped("Setup failures (a step raised, or the guest answered an error), by reason",
            [(reason(r["type"], r["error"]), r, f"step {r['step']}: {r['error']}") for r in results if not r["ok"]])
    grouped("Set up, but a setup command or launched app exited non-zero (upstream's controller carries on), by "
            "reason",
            [(reason("execute", r["exits"][0].split(") ", 1)[1]), r, "; ".join(r["exits"]))
             for r in results if r["ok"] and r["exits"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, required=True, help="OSWorld's evaluation_examples folder")
    parser.add_argument("--parallel", type=int, default=4, help="desktops setting up tasks at once")
    parser.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated domain folders")
    parser.add_argument("--desktop-env-python", type=Path, help="an interpreter with desktop-env 1.0.2 "
                        "(default: the venv tests/support/desktop_env_python.py builds in the user's cache)")
    parser.add_argument("--out", type=Path, help="also write each task's result here (JSON)")
    args = parser.parse_args()
    tasks = load(args.examples, args.domains.split(","))
    runnable = [t for t in tasks if not t["internet"]]
    python = args.desktop_env_python or desktop_env_python()
    print(f"{len(tasks)} task configs, {len(runnable)} without the internet, {args.parallel} desktops at once")
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-osworld-tasks-") as tmp:
        shared = Path(tmp)
        shared.chmod(0o755)
        server = launch_server(shared / "server", "--max-desktops", str(args.parallel + 2))
        try:
            results = run(python, server, runnable, args.parallel, shared / "cache") if runnable else []
        finally:
            server.stop()
    print(f"set up in {time.monotonic() - began:.0f} s wall")
    report(tasks, results)
    if args.out:
        args.out.write_text(json.dumps({"tasks": tasks, "results": results}, indent=1))


if __name__ == "__main__":
    main()
