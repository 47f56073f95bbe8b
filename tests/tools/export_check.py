#!/usr/bin/env python3
"""Checks a `cubpf trace export --format sqlite` database against `cubpf trace stats` of the same
traces, reading the database with the sqlite3 command-line tool (Debian's package), as an analyst
would.  Usage: export_check.py CUBPF DB TRACE...  Prints 'export ok' and the tables compared;
exits 1 with the difference otherwise.

Compared: per kernel name, the count and total of GPU times (stats' samples are the view
gpu_kernel_times); per API function, count and total of wall times; the processes (one row per
trace, pids as stats lists them); the README's three queries run without error."""
import re
import shutil
import subprocess
import sys


def sql(db, query):
    if not shutil.which("sqlite3"):
        sys.exit("export_check: the sqlite3 command-line tool is missing (Debian package "
                 "sqlite3; ci/deps.sh installs it)")
    out = subprocess.run(["sqlite3", "-batch", "-separator", "|", db, query],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"export_check: sqlite3 failed on {query!r}: {out.stderr}")
    return [l.split("|") for l in out.stdout.splitlines() if l]


def stats_tables(cubpf, traces):
    out = subprocess.run([cubpf, "trace", "stats", *traces], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"export_check: cubpf trace stats failed: {out.stderr}")
    tables, cur, pids = {}, None, []
    for line in out.stdout.splitlines():
        m = re.match(r"processes: \d+ \(pids ([\d ]+)\)", line)
        if m:
            pids = sorted(int(p) for p in m.group(1).split())
        if line.startswith("GPU kernels"):
            cur = tables.setdefault("kernels", {})
        elif line.startswith("host API calls"):
            cur = tables.setdefault("api", {})
        elif line.startswith("copies") or not line.strip():
            cur = None if not line.strip() else cur
        elif cur is not None and re.match(r"\s+\d", line):
            f = line.split()
            cur[f[7]] = (int(f[0]), round(float(f[1]), 3))
    return tables, pids


def main():
    cubpf, db, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    tables, pids = stats_tables(cubpf, traces)
    kernels = {r[0]: (int(r[1]), round(int(r[2]) / 1e3, 3)) for r in sql(db,
               "SELECT k.name, COUNT(*), SUM(t.duration_ns) FROM gpu_kernel_times t"
               " JOIN kernels k ON k.id = t.kernel GROUP BY k.name")}
    api = {r[0]: (int(r[1]), round(int(r[2]) / 1e3, 3)) for r in sql(db,
           "SELECT name, COUNT(*), SUM(end_ns - begin_ns) FROM api_calls GROUP BY name")}
    bad = []
    if kernels != tables.get("kernels", {}):
        bad.append(f"kernels: database {kernels} != stats {tables.get('kernels')}")
    if api != tables.get("api", {}):
        bad.append(f"api: database {api} != stats {tables.get('api')}")
    dbpids = sorted(int(r[0]) for r in sql(db, "SELECT pid FROM processes"))
    if dbpids != (pids or dbpids[:1]) or not dbpids:  # stats lists pids for several traces
        bad.append(f"processes: database {dbpids}, stats {pids}")
    for name, query in readme_queries():
        sql(db, query)  # each must run (sqlite3 exits non-zero on an error)
    if bad:
        sys.exit("export_check: " + "\n".join(bad))
    print(f"export ok: {len(dbpids)} processes, kernels {kernels}, api {api}")


def readme_queries():
    """The README's three queries (section "Traces as SQL"), between its ```sql fences."""
    import os
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    text = open(readme).read()
    qs = re.findall(r"```sql\n(.*?)```", text, re.S)
    if len(qs) < 3:
        sys.exit("export_check: README.md has fewer than 3 ```sql queries")
    return [(str(i), q) for i, q in enumerate(qs)]


if __name__ == "__main__":
    main()
