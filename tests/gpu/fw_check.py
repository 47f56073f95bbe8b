# tests/gpu/fw_check.py: the checks of tests/gpu/frameworks.sh on the reports of `cubpf run -t
# TOOL --json` (the last line is the final report) and on the frameworks' cache folders.
#   fw_check.py kcount NAME REPORT NATIVE_STDOUT       coverage table, exact counts
#   fw_check.py memtrace NAME REPORT NATIVE_STDOUT     bytes per space and op
#   fw_check.py threadhist NAME REPORT KCOUNT_REPORT   thread runs = kcount's thread entries
#   fw_check.py multi NAME REPORT...                   two GPUs named; processes merged (issue 20)
#   fw_check.py scan NAME DIR...                       no cubpf code in any cache file
# "expect" lines of the program's native stdout give exact figures ("expect kcount KERNEL
# LAUNCHES THREADS", "expect memtrace SPACE OP BYTES").  Prints RESULT and FAIL lines; exits 1
# on a failure.
import json
import os
import re
import sys
import zlib

failed = 0


def fail(msg):
    global failed
    failed += 1
    print("FAIL " + msg)


def final_report(path):
    last = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                last = line
    if last is None:
        raise SystemExit("FAIL no JSON report in %s" % path)
    return json.loads(last)


def expects(path, tool):
    out = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0] == "expect" and w[1] == tool:
                out.append(w[2:])
    return out


def compiled_here(program, kernel):
    """Kernels the program's framework compiled on this machine (the target: all instrumented);
    the others are libraries' kernels shipped as SASS (PyTorch's, XLA's runtime helpers)."""
    if program == "triton":
        return kernel == "add_kernel"
    if program == "triton_fmad":
        return kernel.endswith("_kernel")
    if program == "inductor":
        return kernel.startswith("triton_")
    if program == "jax":
        return not kernel.startswith("_Z")
    if program == "cupy":
        return kernel.startswith("cupy_")
    if program in ("torch_multi", "torch_dist"):
        return kernel == "add_kernel"
    return True


def kcount(name, report, native):
    d = final_report(report)
    ks = [k for k in d.get("kernels", []) if k.get("launches", 0) > 0]
    inst = [k for k in ks if k.get("instrumented")]
    notinst = [k for k in ks if not k.get("instrumented")]
    run = d.get("run", {})
    print("RESULT frameworks coverage %s: launched=%d instrumented=%d not_instrumented=%d" %
          (name, len(ks), len(inst), len(notinst)))
    if not ks:
        fail("%s: the report lists no launched kernel" % name)
    mine = [k for k in ks if compiled_here(name, k["name"])]
    missed = [k["name"] for k in mine if not k.get("instrumented")]
    print("RESULT frameworks compiled_here %s: launched=%d instrumented=%d" %
          (name, len(mine), len(mine) - len(missed)))
    for k in missed:
        fail("%s: %s, compiled on this machine, was not instrumented" % (name, k))
    for k in inst:
        ok = k["gpu_threads"] == k["threads"] and k["gpu_runs"] == k["launches"]
        print("RESULT frameworks kcount %s %s: launches=%d threads=%d gpu_runs=%d "
              "gpu_threads=%d %s" % (name, k["name"][:60], k["launches"], k["threads"],
                                     k["gpu_runs"], k["gpu_threads"], "exact" if ok else "OFF"))
        if not ok:
            fail("%s %s: GPU counted %d runs / %d threads, launched %d / %d" %
                 (name, k["name"], k["gpu_runs"], k["gpu_threads"], k["launches"], k["threads"]))
    for k in notinst:
        print("RESULT frameworks not_instrumented %s %s: launches=%d" %
              (name, k["name"][:80], k["launches"]))
    # the reasons, each once, with the loads and kernels that gave it
    seen = {}
    for note in run.get("notes", []):
        why = note[6:] if note.startswith("live: ") else note
        why = why.split(": ", 1)[1] if why.startswith("cu") and ": " in why else why
        m = re.match(r"(\d+) kernels? not instrumentable: (.*)", why)
        kernels, why = (int(m.group(1)), m.group(2)) if m else (0, why)
        loads, total = seen.get(why, (0, 0))
        seen[why] = (loads + 1, total + kernels)
    for why, (loads, kernels) in sorted(seen.items(), key=lambda x: -x[1][0]):
        print("RESULT frameworks reason %s (%d loads, %d kernels): %s" %
              (name, loads, kernels, why[:400]))
    for e in expects(native, "kcount"):
        kname, launches, threads = e[0], int(e[1]), int(e[2])
        k = next((k for k in ks if k["name"] == kname), None)
        got = (k["launches"], k["gpu_threads"]) if k and k.get("instrumented") else None
        print("RESULT frameworks expect %s kcount %s: launches/gpu_threads=%s expected=%d %d" %
              (name, kname, got, launches, threads))
        if got != (launches, threads):
            fail("%s: kcount %s: %s, expected %d launches / %d threads" %
                 (name, kname, got, launches, threads))
    sys.stdout.flush()


def memtrace(name, report, native):
    d = final_report(report)
    tot, per = {}, {}
    for k in d.get("kernels", []):
        for t in k.get("traffic", []):
            key = (t["space"], t["op"])
            tot[key] = tot.get(key, 0) + t["bytes"]
            per[(k["name"],) + key] = per.get((k["name"],) + key, 0) + t["bytes"]
    print("RESULT frameworks memtrace %s: %s" % (name, " ".join(
        "%s_%s=%d" % (s, o, b) for (s, o), b in sorted(tot.items()))))
    for e in expects(native, "memtrace"):
        # "SPACE OP BYTES" (all kernels), "KERNEL SPACE OP BYTES", or "~PART SPACE OP BYTES"
        # (the kernels whose name holds PART: C++ names have spaces)
        if len(e) == 4 and e[0].startswith("~"):
            names = [n for (n, s, o) in per if e[0][1:] in n and (s, o) == (e[1], e[2])]
            got = sum(per[(n, e[1], e[2])] for n in names) if names else None
            if not names:
                print("RESULT frameworks %s memtrace kernels: %s" % (name, sorted(set(
                    n[:90] for (n, s, o) in per))))
            e = ["%s %s" % (e[0], e[1])] + e[2:]
        elif len(e) == 4:
            got = per.get((e[0], e[1], e[2]))
            e = ["%s %s" % (e[0], e[1])] + e[2:]
        else:
            got = tot.get((e[0], e[1]))
        space, op, want = e[0], e[1], int(e[2])
        print("RESULT frameworks expect %s memtrace %s %s: bytes=%s expected=%d" %
              (name, space, op, got, want))
        if got != want:
            fail("%s: memtrace %s %s: %s bytes, expected %d" % (name, space, op, got, want))


def threadhist(name, report, kreport):
    """Thread runs (threadhist counts each thread's entry) = the threads the same run launched of instrumented kernels (a framework
    that autotunes, as Inductor and XLA do, launches other configurations in each run, so the
    kcount run's entries are shown beside, not compared)."""
    d = final_report(report)
    runs = sum(r["executions"] * r["threads"] for r in d.get("distribution", []))
    launched = d.get("launched_threads")
    k = final_report(kreport)
    entries = sum(x.get("gpu_threads", 0) for x in k.get("kernels", []) if x.get("instrumented"))
    print("RESULT frameworks threadhist %s: thread_runs=%d launched_threads=%s "
          "kcount_run_thread_entries=%d" % (name, runs, launched, entries))
    want = launched if launched is not None else entries
    if want and runs != want:
        fail("%s: %d thread runs (threadhist), %d threads launched" % (name, runs, want))


def multi(name, reports):
    """Issue 20: each report names both GPUs; torch_dist's merges its two processes and lists
    NCCL's kernels as not instrumented, with a reason."""
    for path in reports:
        d = final_report(path)
        run = d.get("run", {})
        devs = run.get("devices", [])
        procs = run.get("processes", 1)
        print("RESULT frameworks multi %s %s: devices=%d processes=%s" %
              (name, d.get("tool"), len(devs), procs))
        if len(devs) < 2:
            fail("%s %s: the report names %d GPUs, not 2" % (name, d.get("tool"), len(devs)))
        plist = run.get("process_list", [])
        busy = [p for p in plist if p.get("launches", 0) > 0]
        launches = sum(k.get("launches", 0) for k in d.get("kernels", []))
        if d.get("tool") == "kcount" and plist:
            print("RESULT frameworks multi %s: processes with launches=%d, their launches=%d, "
                  "report's launches=%d" % (name, len(busy), sum(p["launches"] for p in plist),
                                            launches))
            if sum(p["launches"] for p in plist) != launches:
                fail("%s: the processes' launches do not add up to the report's" % name)
        if name == "torch_dist" and len(busy) != 2:
            fail("%s %s: %d processes with launches in the report, not 2" %
                 (name, d.get("tool"), len(busy)))
        if name != "torch_dist":
            continue
        nccl = [k for k in run.get("not_instrumented", []) if "nccl" in k.lower()]
        why = [n for n in run.get("notes", []) if "SASS" in n or "no PTX" in n]
        print("RESULT frameworks multi %s %s: nccl_kernels_not_instrumented=%d reasons=%d %s" %
              (name, d.get("tool"), len(nccl), len(why), (nccl[:1] or ["-"])[0][:60]))
        if not nccl or not why:
            fail("%s %s: NCCL's kernels are not listed with a reason" % (name, d.get("tool")))


MARKERS = (b"__cubpf", b"__cb_r", b"cubpf: probe")


def contents(data):
    """The file and what it decompresses to (JAX compresses its cache entries)."""
    yield data
    for dec in (lambda b: zlib.decompress(b), lambda b: zlib.decompress(b, 31)):
        try:
            yield dec(data)
        except Exception:
            pass
    try:
        import zstandard
        yield zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 30)
    except Exception:
        pass


def scan(name, dirs):
    files = hits = 0
    for top in dirs:
        for root, _, names in os.walk(top):
            for n in names:
                p = os.path.join(root, n)
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                files += 1
                if any(m in c for c in contents(data) for m in MARKERS):
                    hits += 1
                    fail("%s: %s holds cubpf code" % (name, p))
    print("RESULT frameworks cache %s: files=%d with_cubpf_code=%d" % (name, files, hits))


if __name__ == "__main__":
    what, name = sys.argv[1], sys.argv[2]
    if what == "kcount":
        kcount(name, sys.argv[3], sys.argv[4])
    elif what == "memtrace":
        memtrace(name, sys.argv[3], sys.argv[4])
    elif what == "threadhist":
        threadhist(name, sys.argv[3], sys.argv[4])
    elif what == "multi":
        multi(name, sys.argv[3:])
    elif what == "scan":
        scan(name, sys.argv[3:])
    sys.exit(1 if failed else 0)
