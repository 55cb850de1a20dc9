#!/usr/bin/env python3
"""Every #include in src/ and include/ against the module rules of docs/architecture.md.

The rules are the table under "## Module rules" there: a module's files include the headers of
the modules in its row and the outside libraries in its row; its public headers only the
libraries named for them. A header of src/<module>/ is private to that module. Usage:
layering_test.py ROOT. Exits 1 with one line per breach."""
import os
import re
import sys

# The outside libraries, by the headers that belong to them.
LIBRARIES = [
    ("torch", re.compile(r"(torch|ATen|c10)/")),
    ("boost.context", re.compile(r"boost/context/")),
    ("mpi", re.compile(r"mpi\.h$")),
    ("nccl", re.compile(r"nccl\.h$")),
    ("cuda", re.compile(r"cuda[a-z_]*\.h$")),
    ("hdf5", re.compile(r"(hdf5|H5[A-Za-z]*)\.h$")),
    ("cli11", re.compile(r"CLI/")),
    ("protobuf", re.compile(r"(google/protobuf/|.*\.pb\.h$)")),
    ("json", re.compile(r"nlohmann/")),
    ("httplib", re.compile(r"httplib\.h$")),
    ("pcre2", re.compile(r"pcre2\.h$")),
    ("icu", re.compile(r"unicode/")),
    ("zlib", re.compile(r"zlib\.h$")),
    ("xxhash", re.compile(r"xxhash\.h$")),
]
# The C++ standard library (no extension) and the POSIX and glibc headers any module may use.
SYSTEM = re.compile(r"([a-z_]+|(unistd|fcntl|malloc|sched|dlfcn|signal|errno|pthread|dirent|poll)\.h|(sys|arpa|netinet)/[a-z_]+\.h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def read_rules(doc):
    """{module: (modules it may include, libraries its sources may include, libraries its headers may include)}"""
    text = open(doc, encoding="utf-8").read()
    section = text.split("## Module rules", 1)
    if len(section) < 2:
        sys.exit(f"{doc}: no '## Module rules' section")
    rules = {}
    for line in section[1].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("module", "") or set(cells[0]) <= set("- "):
            if rules and not line.startswith("|"):
                break  # the table has ended
            continue
        names = lambda cell: {n.strip() for n in cell.split(",") if n.strip() and n.strip() != "none"}
        rules[cells[0]] = (names(cells[1]), names(cells[2]), names(cells[3]))
    return rules


def library_of(header):
    for name, pattern in LIBRARIES:
        if pattern.match(header):
            return name
    return None


def check_file(root, path, module, public, rules, breaches):
    modules, libraries, header_libraries = rules[module]
    rel = os.path.relpath(path, root)
    for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        quote, header = m.groups()
        where = f"{rel}:{number}: {module} includes {header}"
        if quote == '"' and header.startswith("arclight/"):
            used = header.split("/")[1]
            if used not in modules and f"{used}/{header.split('/')[-1]}" not in modules:
                breaches.append(f"{where}: module {used} is not among its rules ({', '.join(sorted(modules))})")
            continue
        library = library_of(header)
        if quote == '"' and library is None:
            # A private header: beside the file that includes it, in the same module's src/ folder.
            if public or not os.path.exists(os.path.join(os.path.dirname(path), header)):
                breaches.append(f"{where}: not a header of src/{module}/ (private headers stay in their module)")
            continue
        if library is None:
            if not SYSTEM.match(header):
                breaches.append(f"{where}: an outside library the rules do not name (add it to docs/architecture.md)")
            continue
        allowed = header_libraries if public else libraries
        if library not in allowed:
            kind = "its public headers" if public else "it"
            breaches.append(f"{where}: {library} is not a library {kind} may include")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    rules = read_rules(os.path.join(root, "docs", "architecture.md"))
    breaches, files = [], 0
    for top, public in (("include/arclight", True), ("src", False)):
        for module in sorted(os.listdir(os.path.join(root, top))):
            folder = os.path.join(root, top, module)
            if not os.path.isdir(folder):
                continue
            if module not in rules:
                breaches.append(f"{top}/{module}: a module without a row in docs/architecture.md's rules")
                continue
            for dirpath, _, names in os.walk(folder):
                for name in sorted(names):
                    if name.endswith((".hpp", ".cpp", ".h")):
                        files += 1
                        check_file(root, os.path.join(dirpath, name), module, public, rules, breaches)
    for b in breaches:
        print(b)
    print(f"{files} files, {len(rules)} modules: {len(breaches)} breaches of the module rules")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
