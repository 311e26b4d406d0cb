#!/usr/bin/env python3
"""Prints one line per translation unit, "<key> <file>", for scripts/tidy.sh's cache of clean
results: the key is the SHA-256 of what decides clang-tidy's verdict on the file, namely
clang-tidy's version, the .clang-tidy configuration, the header filter, the file's compile
flags and its preprocessed text (the file and every header it includes, floodgate's and the
system's, after macro expansion). A file whose key is in the cache passed with exactly that
input before, so it passes again and is not checked twice.

    scripts/tidy_keys.py BUILD_DIR JOBS FILTER FILE..."""

import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def main():
    build, jobs, header_filter, files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = {os.path.normpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        config = f.read()
    common = hashlib.sha256(version + b"\0" + config + b"\0" + header_filter.encode()).digest()

    def key(path):
        entry = db[path]
        args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
        # The same command, preprocessing to stdout instead of compiling to the object file.
        cmd, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a == "-c":
                continue
            cmd.append(a)
        # Paths under the clone spelled relative to it, so that clones in other directories
        # share the cache.
        flags = "\0".join(cmd).replace(root, "@ROOT@").encode()
        pre = subprocess.run(cmd + ["-E", "-P"], cwd=entry["directory"], capture_output=True)
        h = hashlib.sha256(common)
        h.update(flags)
        # A file that does not preprocess gets a key of its output: never a cached pass.
        h.update(b"%d\0" % pre.returncode)
        h.update(pre.stdout)
        h.update(pre.stderr)
        return h.hexdigest()

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, k in zip(files, pool.map(key, files)):
            print(k, path)


if __name__ == "__main__":
    main()
